"""``attnkit.reduction``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.stages.reduction`."""

import sys

from .stages import reduction as _module
from .stages.reduction import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
