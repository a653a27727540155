"""``attnkit.families.docs``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.tasks.docs`."""

import sys

from ..tasks import docs as _module
from ..tasks.docs import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
