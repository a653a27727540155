"""PyTorch-shaped modules: ``attnkit.nn.MultiheadAttention`` is a drop-in for
``torch.nn.MultiheadAttention``; the attnkit-native modules are re-exported beside it
(``AttentionHeads``, attnkit's multi-head attention of any score, alignment and normaliser,
was called ``MultiHeadAttention`` until this release: that name still works, with a
DeprecationWarning, for one release)."""

from .._renamed import renamed_in
from ..mechanisms.multidim import MultiDimensionalAttention
from ..modules import Attention, AttentionHeads, CrossAttention, SelfAttention
from .multihead import MultiheadAttention

__getattr__ = renamed_in(__name__, MultiHeadAttention=("AttentionHeads", AttentionHeads))


__all__ = [
    "Attention",
    "AttentionHeads",
    "CrossAttention",
    "MultiDimensionalAttention",
    "MultiheadAttention",
    "SelfAttention",
]
