"""``attnkit.alignment``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.stages.alignment`."""

import sys

from .stages import alignment as _module
from .stages.alignment import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
