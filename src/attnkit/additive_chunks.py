"""``attnkit.additive_chunks``, kept for one release (README, "Where things moved"):
the same module as :mod:`attnkit.stages._additive_chunks`."""

import sys

from .stages import _additive_chunks as _module

sys.modules[__name__] = _module
