"""attnkit: the attention mechanisms of the literature, composable, verified, fast.

attention = score -> alignment -> normaliser -> reduction; see ``attnkit.attend``.
"""

from importlib.metadata import PackageNotFoundError, version

from . import masks
from ._checks import checks, get_checks, set_checks
from ._renamed import moved_name
from .core import AttentionResult, attend, weighted_sum
from .kv_cache import KVCache
from .masks import and_masks, band_mask, causal_mask, or_masks, padding_mask
from .mechanisms.hard import GumbelSoftmax, MovingAverageBaseline, SampleReduce, reinforce_loss
from .mechanisms.multidim import MultiDimensionalAttention
from .modules import Attention, AttentionHeads, CrossAttention, SelfAttention
from .registry import build
from .stages.alignment import (
    Alignment,
    AlignSpec,
    CausalAlignment,
    GlobalAlignment,
    LocalM,
    LocalP,
    SlidingWindow,
)
from .stages.normalisers import (
    Entmax15,
    Softmax,
    Sparsemax,
    entmax15,
    masked_softmax,
    softmax,
    sparsemax,
)
from .stages.scores import (
    AdditiveScore,
    CosineScore,
    DotScore,
    GeneralScore,
    LocationScore,
    ScaledDotScore,
    Score,
)

# The training API (``attnkit.fit``) is imported on first use: ``import attnkit`` for the
# attention core stays light.
_TRAINING = {
    "fit": "train.fit",
    "FitResult": "train.fit",
    "prepare": "train.fit",
    "FitConfig": "train.config",
    "DataConfig": "train.config",
    "ModelConfig": "train.config",
    "TrainConfig": "train.config",
}


# subpackages reachable as ``attnkit.viz`` etc. after a plain ``import attnkit``, imported
# on first use; ``attnkit.hf`` is the public name of ``attnkit.interop.hf``
_SUBPACKAGES = ("data", "decode", "eval", "experiments", "models", "train", "viz",
                "stages", "mechanisms", "interop", "hf")  # fmt: skip


def __getattr__(name: str) -> object:
    import importlib

    if name in _TRAINING:
        return getattr(importlib.import_module(f".{_TRAINING[name]}", __name__), name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    if name == "MultiHeadAttention":  # renamed AttentionHeads; kept for one release
        return moved_name("attnkit.MultiHeadAttention", "attnkit.AttentionHeads", AttentionHeads)
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")


try:
    __version__ = version("attnkit")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+src"


__all__ = [
    "checks",
    "get_checks",
    "set_checks",
    "DataConfig",
    "FitConfig",
    "FitResult",
    "ModelConfig",
    "TrainConfig",
    "fit",
    "prepare",
    "GumbelSoftmax",
    "KVCache",
    "MovingAverageBaseline",
    "SampleReduce",
    "reinforce_loss",
    "AdditiveScore",
    "AlignSpec",
    "Alignment",
    "Attention",
    "AttentionHeads",
    "AttentionResult",
    "CausalAlignment",
    "CosineScore",
    "CrossAttention",
    "DotScore",
    "Entmax15",
    "GeneralScore",
    "GlobalAlignment",
    "LocalM",
    "LocalP",
    "LocationScore",
    "MultiDimensionalAttention",
    "ScaledDotScore",
    "Score",
    "SelfAttention",
    "SlidingWindow",
    "Softmax",
    "Sparsemax",
    "and_masks",
    "attend",
    "band_mask",
    "build",
    "causal_mask",
    "entmax15",
    "masked_softmax",
    "masks",
    "or_masks",
    "padding_mask",
    "softmax",
    "sparsemax",
    "weighted_sum",
]
