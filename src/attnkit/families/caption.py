"""``attnkit.families.caption``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.tasks.caption`."""

import sys

from ..tasks import caption as _module
from ..tasks.caption import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
