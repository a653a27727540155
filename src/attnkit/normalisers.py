"""``attnkit.normalisers``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.stages.normalisers`."""

import sys

from .stages import normalisers as _module
from .stages.normalisers import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
