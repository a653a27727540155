"""PyTorch-shaped modules: ``attnkit.nn.MultiheadAttention`` is a drop-in for
``torch.nn.MultiheadAttention``; the attnkit-native modules are re-exported beside it
(``AttentionHeads``, attnkit's multi-head attention of any score, alignment and normaliser,
was called ``MultiHeadAttention`` until this release: that name still works, with a
DeprecationWarning, for one release)."""

from .._renamed import moved_name
from ..mechanisms.multidim import MultiDimensionalAttention
from ..modules import Attention, AttentionHeads, CrossAttention, SelfAttention
from .multihead import MultiheadAttention


def __getattr__(name: str) -> object:
    if name == "MultiHeadAttention":
        return moved_name("attnkit.nn.MultiHeadAttention", "attnkit.nn.AttentionHeads",
                          AttentionHeads)  # fmt: skip
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Attention",
    "AttentionHeads",
    "CrossAttention",
    "MultiDimensionalAttention",
    "MultiheadAttention",
    "SelfAttention",
]
