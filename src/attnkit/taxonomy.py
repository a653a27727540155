"""The family of attention mechanisms as the notes draw it, and where each branch lives.

The notes classify attention along a few independent axes: how a score is computed, which keys
a query may see (alignment; sparsity is a kind of alignment), where positions enter the score,
how soft the choice is, which sequences are attended (input), and what the attention returns
(output). attnkit is built on the same axes (score -> alignment -> normaliser -> reduction,
plus position), so every branch is either a registry name, a module, a model or a flag;
``attnkit info`` prints this tree, and tests/test_taxonomy.py checks that every place named
here exists.

A ``Branch`` names one variant: its axis, its name, its paper, and ``where``: the places to use
it, each one of ``registry:KIND/NAME`` (a registry name), ``module:dotted.path[:Attr]``,
``model:NAME`` (``attnkit train --model NAME``) or ``flag:--name VALUE``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Branch:
    """One variant of the family: its axis, name, paper and where it is in attnkit."""

    axis: str
    name: str
    paper: str
    where: tuple[str, ...]


def _b(axis: str, name: str, paper: str, *where: str) -> Branch:
    return Branch(axis, name, paper, where)


FAMILY: tuple[Branch, ...] = (
    _b("score", "dot", "Luong 2015", "registry:score/dot"),
    _b("score", "general (bilinear)", "Luong 2015", "registry:score/general"),
    _b("score", "concat / additive", "Bahdanau 2015", "registry:score/additive"),
    _b("score", "scaled dot-product", "Vaswani 2017", "registry:score/scaled_dot"),
    _b("score", "location-based", "Luong 2015", "registry:score/location"),
    _b("alignment", "global", "Luong 2015", "registry:alignment/global"),
    _b("alignment", "local-m, local-p (Gaussian window)", "Luong 2015",
       "registry:alignment/local-m", "registry:alignment/local-p"),  # fmt: skip
    _b("alignment", "restricted sliding window, O(n·w)", "Vaswani 2017",
       "registry:alignment/sliding", "module:attnkit.local"),  # fmt: skip
    _b("sparsity", "strided and fixed factorised patterns, O(n·√n)", "Child 2019",
       "registry:alignment/strided", "registry:alignment/fixed",
       "module:attnkit.local.factorised"),  # fmt: skip
    # the answers to attention's O(n²) cost, side by side
    _b("cost", "restricted (sliding window): O(n·w)", "Vaswani 2017",
       "registry:alignment/sliding-causal", "module:attnkit.local.sliding"),  # fmt: skip
    _b("cost", "sparse (factorised patterns): O(n·√n)", "Child 2019",
       "registry:alignment/strided-causal", "module:attnkit.local.factorised"),  # fmt: skip
    _b("cost", "linear (kernelised, φ(q)ᵀφ(k) reassociated): O(n·d²), an RNN when causal",
       "Katharopoulos 2020", "registry:score/linear", "registry:normaliser/ratio",
       "module:attnkit.linear"),  # fmt: skip
    _b("cost", "Performer (FAVOR+ random features of the softmax kernel): O(n·m·d)",
       "Choromanski 2021", "registry:score/performer",
       "module:attnkit.stages.kernels:FavorFeatures"),  # fmt: skip
    _b("position", "sinusoidal (absolute)", "Vaswani 2017",
       "module:attnkit.models.transformer:sinusoids"),  # fmt: skip
    _b("position", "learned, relative (Shaw), T5 bias, ALiBi, RoPE, Transformer-XL",
       "Gehring 2017; Shaw 2018; Raffel 2020; Press 2022; Su 2021; Dai 2019",
       "registry:position/learned", "registry:position/shaw", "registry:position/t5",
       "registry:position/alibi", "registry:position/rope", "registry:position/xl"),  # fmt: skip
    _b("position", "RoPE past its training length: interpolation, NTK-aware, YaRN",
       "Chen 2023; Peng 2023", "module:attnkit.stages.rope_scaling",
       "flag:--rope-scaling yarn"),  # fmt: skip
    _b("softness", "soft (softmax; sparsemax, entmax)", "Bahdanau 2015; Martins 2016",
       "registry:normaliser/softmax", "registry:normaliser/sparsemax"),  # fmt: skip
    _b("softness", "hard: sampled, REINFORCE with a baseline", "Xu 2015",
       "registry:reduction/sample", "module:attnkit.mechanisms.hard:reinforce_loss",
       "flag:--softness hard"),  # fmt: skip
    _b("softness", "hard: Gumbel-softmax", "Jang 2017", "registry:normaliser/gumbel",
       "flag:--softness gumbel"),  # fmt: skip
    _b("softness", "variational attention", "Deng 2018",
       "module:attnkit.mechanisms.variational", "flag:--softness variational"),  # fmt: skip
    _b("input", "cross (encoder-decoder)", "Bahdanau 2015", "model:rnnsearch", "model:luong"),
    _b("input", "self", "Vaswani 2017", "model:transformer"),
    _b("input", "co-attention (parallel, alternating)", "Lu 2016",
       "module:attnkit.mechanisms.coattention", "model:digit-qa"),  # fmt: skip
    _b("input", "hierarchical (words, then sentences)", "Yang 2016",
       "module:attnkit.mechanisms.hierarchical", "model:han"),  # fmt: skip
    _b("output", "single", "Bahdanau 2015", "module:attnkit.core:attend"),
    _b("output", "multi-head", "Vaswani 2017", "module:attnkit.nn:MultiheadAttention"),
    _b("output", "grouped-query: H query heads share Hkv key/value heads", "Ainslie 2023",
       "module:attnkit.grouped", "module:attnkit.modules:AttentionHeads"),  # fmt: skip
    _b("output", "multi-query: one key/value head", "Shazeer 2019",
       "module:attnkit.grouped", "flag:--kv-heads 1"),  # fmt: skip
    _b("output", "multi-dimensional (feature-wise)", "Shen 2018",
       "module:attnkit.mechanisms.multidim"),  # fmt: skip
    _b("model", "RNN encoder-decoder without attention", "Cho 2014; Sutskever 2014",
       "model:rnnencdec"),  # fmt: skip
    _b("model", "RNN encoder-decoder with attention", "Bahdanau 2015; Luong 2015",
       "model:rnnsearch", "model:luong"),  # fmt: skip
    _b("model", "Transformer", "Vaswani 2017", "model:transformer"),
    _b("model", "Transformer-XL: segment-level memory, relative positions", "Dai 2019",
       "model:transformer-xl", "registry:position/xl"),  # fmt: skip
    _b("model", "Transformer language model (absolute positions, no memory)", "Vaswani 2017",
       "model:transformer-lm"),  # fmt: skip
)
"""Every branch of the family, in the order ``attnkit info`` prints them."""

AXES: tuple[str, ...] = tuple(dict.fromkeys(b.axis for b in FAMILY))

__all__ = ["AXES", "FAMILY", "Branch"]
