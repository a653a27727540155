"""``attnkit.families.forecast``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.tasks.forecast`."""

import sys

from ..tasks import forecast as _module
from ..tasks.forecast import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
