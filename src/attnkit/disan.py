"""``attnkit.disan``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.mechanisms.disan`."""

import sys

from .mechanisms import disan as _module
from .mechanisms.disan import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
