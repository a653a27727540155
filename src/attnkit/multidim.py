"""``attnkit.multidim``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.mechanisms.multidim`."""

import sys

from .mechanisms import multidim as _module
from .mechanisms.multidim import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
