"""Local attention in O(n·window): sliding windows, local-m and local-p without a dense
Tq x Tk matrix. The reference semantics are ``attnkit.attend`` with the ``SlidingWindow``,
``LocalM`` and ``LocalP`` alignments; every function here is tested against it. ``attend``
routes to these kernels through ``dispatch.fast_local`` by the stages' declared capabilities
(``attnkit.stages.capabilities``); nothing here imports ``attnkit.core``."""

from .band import band_key_index, band_to_dense
from .sliding import DEFAULT_BLOCK, LocalResult, sliding_window_attention
from .window import WindowResult, attend_window, local_window_attention

__all__ = [
    "DEFAULT_BLOCK",
    "LocalResult",
    "WindowResult",
    "attend_window",
    "band_key_index",
    "band_to_dense",
    "local_window_attention",
    "sliding_window_attention",
]
