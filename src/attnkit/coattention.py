"""``attnkit.coattention``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.mechanisms.coattention`."""

import sys

from .mechanisms import coattention as _module
from .mechanisms.coattention import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
