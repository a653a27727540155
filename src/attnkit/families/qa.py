"""``attnkit.families.qa``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.tasks.qa`."""

import sys

from ..tasks import qa as _module
from ..tasks.qa import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
