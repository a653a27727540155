"""``attnkit.scores``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.stages.scores`."""

import sys

from .stages import scores as _module
from .stages.scores import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
