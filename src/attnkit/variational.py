"""``attnkit.variational``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.mechanisms.variational`."""

import sys

from .mechanisms import variational as _module
from .mechanisms.variational import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
