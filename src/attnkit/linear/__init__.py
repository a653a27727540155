"""Linear (kernelised) attention in O(n·M·Dv): softmax(qᵀk) replaced by a feature map's
φ(q)ᵀφ(k) and the sum over keys reassociated (Katharopoulos et al. 2020; Choromanski et al.
2021's FAVOR+ features). The stages are in ``attnkit.stages.kernels`` (``KernelScore``,
``KernelRatio``); their reference semantics are ``attnkit.attend``'s dense path with those
stages (the implied weights), and ``attend`` routes here through ``dispatch.linear_attend``
by the stages' declared capabilities. ``linear_step`` decodes with a constant-size state;
``recurrent.step_heads`` runs it through a multi-head module. Nothing here imports
``attnkit.core``."""

from .dispatch import LinearResult, linear_attend
from .kernels import (
    DEFAULT_CHUNK,
    LinearState,
    causal_linear_attention,
    implied_weights,
    linear_attention,
    linear_step,
)
from .recurrent import step_heads

__all__ = [
    "DEFAULT_CHUNK",
    "LinearResult",
    "LinearState",
    "causal_linear_attention",
    "implied_weights",
    "linear_attend",
    "linear_attention",
    "linear_step",
    "step_heads",
]
