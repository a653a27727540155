"""``attnkit.stepwise``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.mechanisms.stepwise`."""

import sys

from .mechanisms import stepwise as _module
from .mechanisms.stepwise import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
