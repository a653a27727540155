"""PyTorch-shaped modules: ``attnkit.nn.MultiheadAttention`` is a drop-in for
``torch.nn.MultiheadAttention``; the attnkit-native modules are re-exported beside it."""

from ..modules import Attention, CrossAttention, MultiHeadAttention, SelfAttention
from ..multidim import MultiDimensionalAttention
from .multihead import MultiheadAttention

__all__ = [
    "Attention",
    "CrossAttention",
    "MultiDimensionalAttention",
    "MultiHeadAttention",
    "MultiheadAttention",
    "SelfAttention",
]
