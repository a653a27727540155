"""``attnkit.hf_attention``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.interop.hf_attention`."""

import sys

from .interop import hf_attention as _module
from .interop.hf_attention import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
