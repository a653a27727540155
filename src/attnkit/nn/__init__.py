"""PyTorch-shaped modules: ``attnkit.nn.MultiheadAttention`` is a drop-in for
``torch.nn.MultiheadAttention``; the attnkit-native modules are re-exported beside it."""

from ..mechanisms.multidim import MultiDimensionalAttention
from ..modules import Attention, CrossAttention, MultiHeadAttention, SelfAttention
from .multihead import MultiheadAttention

__all__ = [
    "Attention",
    "CrossAttention",
    "MultiDimensionalAttention",
    "MultiHeadAttention",
    "MultiheadAttention",
    "SelfAttention",
]
