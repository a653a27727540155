"""``attnkit.hard``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.mechanisms.hard`."""

import sys

from .mechanisms import hard as _module
from .mechanisms.hard import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
