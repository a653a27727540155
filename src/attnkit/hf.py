"""``attnkit.hf``: the public name of :mod:`attnkit.interop.hf` (the same module)."""

import sys

from .interop import hf as _module
from .interop.hf import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
