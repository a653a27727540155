"""``attnkit.capabilities``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.stages.capabilities`."""

import sys

from .stages import capabilities as _module
from .stages.capabilities import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
