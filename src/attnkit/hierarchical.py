"""``attnkit.hierarchical``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.mechanisms.hierarchical`."""

import sys

from .mechanisms import hierarchical as _module
from .mechanisms.hierarchical import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
