"""RoPE past its training length: position interpolation (Chen et al. 2023), NTK-aware and
YaRN (Peng et al. 2023) against references from the papers' formulas, against transformers'
own rope init functions where it is installed, and through build and the language model."""

import math

import numpy as np
import pytest
import torch
from _reference import np64
from _rope_reference import ntk_thetas, pi_thetas, rotate_pairs, thetas, yarn_thetas

import attnkit
from attnkit.core import attend
from attnkit.stages.position import RotaryPosition
from attnkit.stages.rope_scaling import rope_frequencies

pytestmark = pytest.mark.usefixtures("one_thread")

CASES = [(8, 2.0, 32), (16, 4.0, 64), (64, 8.0, 2048), (128, 16.0, 4096)]


@pytest.mark.parametrize(("d", "s", "length"), CASES)
def test_frequencies_are_the_papers(d, s, length) -> None:
    for name, want in (("none", thetas(d)), ("linear", pi_thetas(d, s)),
                       ("ntk", ntk_thetas(d, s))):  # fmt: skip
        got, factor = rope_frequencies(d, scaling=name, factor=s, original_len=length)
        np.testing.assert_allclose(np64(got), want, rtol=1e-13)
        assert factor == 1.0
    want, mscale = yarn_thetas(d, s, length)
    got, factor = rope_frequencies(d, scaling="yarn", factor=s, original_len=length)
    np.testing.assert_allclose(np64(got), want, rtol=1e-13)
    assert factor == pytest.approx(mscale, rel=1e-15)


@pytest.mark.parametrize(("d", "s", "length"), CASES)
def test_the_scalings_keep_what_their_papers_keep(d, s, length) -> None:
    """NTK-aware: the fastest pair unchanged, the slowest interpolated by exactly s. YaRN: the
    pairs that turn more than β = 32 times within L unchanged, those that turn less than
    α = 1 time interpolated by s (Peng et al. 2023, §3.2)."""
    plain = thetas(d)
    ntk, _ = rope_frequencies(d, scaling="ntk", factor=s)
    assert float(ntk[0]) == 1.0
    assert float(ntk[-1]) == pytest.approx(plain[-1] / s, rel=1e-12)
    yarn, _ = rope_frequencies(d, scaling="yarn", factor=s, original_len=length)
    for i, t in enumerate(plain):
        turns = length * t / (2 * math.pi)
        if turns > 32 * 1.5:  # clear of the floored boundary
            assert float(yarn[i]) == pytest.approx(t, rel=1e-13)
        if turns < 1 / 1.5:
            assert float(yarn[i]) == pytest.approx(t / s, rel=1e-13)


@pytest.mark.parametrize("scaling", ["linear", "ntk", "yarn"])
def test_rotation_equals_the_reference_rotation(scaling) -> None:
    d, s, length = 8, 4.0, 16
    angles = {"linear": pi_thetas(d, s), "ntk": ntk_thetas(d, s)}.get(scaling)
    mscale = 1.0
    if angles is None:
        angles, mscale = yarn_thetas(d, s, length)
    rope = RotaryPosition(d, scaling=scaling, factor=s, original_len=length).double()
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 5, d, generator=g, dtype=torch.float64)
    pos = torch.tensor([0.0, 3.0, 17.0, 40.0, 63.0], dtype=torch.float64)
    placed = rope(q, k, pos, pos)
    for i, m in enumerate(pos.tolist()):
        want = [x * mscale for x in rotate_pairs(q[i].tolist(), m, angles)]
        np.testing.assert_allclose(np64(placed.query[i]), want, rtol=1e-12, atol=1e-13)


def test_position_interpolation_is_plain_rope_at_m_over_s() -> None:
    """Chen et al. 2023, eq. 4: the scores at positions m, n equal plain RoPE's at m/s, n/s."""
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(3, 1, 7, 8, generator=g, dtype=torch.float64)
    pos = torch.arange(7, dtype=torch.float64) * 5
    pi = RotaryPosition(8, scaling="linear", factor=5.0)
    got = attend(q, k, v, position=pi, positions=pos, key_positions=pos)
    want = attend(q, k, v, position=RotaryPosition(8), positions=pos / 5, key_positions=pos / 5)
    torch.testing.assert_close(got.weights, want.weights, rtol=1e-12, atol=1e-14)


def test_yarn_divides_the_scores_by_t() -> None:
    """Peng et al. 2023, eq. 22: softmax(q_mᵀk_n / (t√d)) with √(1/t) = 0.1 ln s + 1."""
    g = torch.Generator().manual_seed(2)
    q, k, v = torch.randn(3, 1, 6, 16, generator=g, dtype=torch.float64)
    yarn = RotaryPosition(16, scaling="yarn", factor=8.0, original_len=32)
    got = attend(q, k, v, position=yarn).scores
    theta, _ = rope_frequencies(16, scaling="yarn", factor=8.0, original_len=32)
    pos = torch.arange(6)
    from attnkit.stages.position import rotate

    plain = rotate(q, pos, theta=theta) @ rotate(k, pos, theta=theta).transpose(-2, -1) / 4
    torch.testing.assert_close(got, plain * (0.1 * math.log(8.0) + 1) ** 2)


@pytest.mark.parametrize(("rope_type", "ours"), [("linear", "linear"), ("dynamic", "ntk"),
                                                 ("yarn", "yarn")])  # fmt: skip
def test_equal_to_transformers_rope_init(rope_type, ours) -> None:
    """transformers.modeling_rope_utils' init functions (float32): "linear"; "dynamic" at the
    sequence length where its factor is ours (f·n/L - (f - 1) = s); "yarn"."""
    utils = pytest.importorskip("transformers.modeling_rope_utils")
    from transformers import LlamaConfig

    d, heads, length, s = 32, 2, 128, 4.0
    params = {"rope_type": rope_type, "factor": s, "rope_theta": 10000.0}
    if rope_type == "yarn":
        params["original_max_position_embeddings"] = length
    config = LlamaConfig(hidden_size=d * heads, num_attention_heads=heads,
                         max_position_embeddings=length, rope_parameters=params)  # fmt: skip
    # "dynamic" stretches the base by (f·n/L - (f - 1))^(d/(d-2)): asked at n = L(2f - 1)/f,
    # that is f, the static NTK-aware scaling's s
    extra = {"seq_len": int(length * (2 * s - 1) / s)} if rope_type == "dynamic" else {}
    inv, factor = utils.ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", **extra)
    got, our_factor = rope_frequencies(d, scaling=ours, factor=s, original_len=length)
    np.testing.assert_allclose(np64(got), np64(inv), rtol=2e-6)
    assert our_factor == pytest.approx(factor)


def test_build_and_errors() -> None:
    m = attnkit.build(dim=16, heads=2, position="rope", rope_scaling="yarn", rope_factor=4,
                      max_len=64)  # fmt: skip
    assert m.position.scaling == "yarn" and m.position.original_len == 64
    assert attnkit.build(dim=16, heads=2, position="rope", rope_scaling="pi",
                         rope_factor=2).position.scaling == "linear"  # fmt: skip
    for kw, says in (
        (dict(position="alibi", rope_scaling="yarn", rope_factor=4), "no rotation to scale"),
        (dict(rope_scaling="yarn", rope_factor=4), "position='rope'"),
        (dict(position="rope", rope_scaling="long", rope_factor=4), "unknown RoPE scaling"),
        (dict(position="rope", rope_scaling="linear", rope_factor=0.5), "s >= 1"),
    ):
        with pytest.raises(ValueError, match=says):
            attnkit.build(dim=16, heads=2, **kw)
    with pytest.raises(ValueError, match="original_len"):
        RotaryPosition(8, scaling="yarn", factor=2.0)


def test_half_model_keeps_float64_angles() -> None:
    rope = RotaryPosition(8, scaling="ntk", factor=4.0).half()
    assert rope.theta is not None and rope.theta.dtype == torch.float64


def test_language_model_with_scaled_rope() -> None:
    from attnkit.cli.train import MODEL_OPTIONS
    from attnkit.models.lm import TransformerLM, TransformerLMConfig

    assert {"rope_scaling", "rope_factor"} <= set(MODEL_OPTIONS)
    c = TransformerLMConfig(10, 30, dim=16, heads=2, layers=1, ff=32, position="rope",
                            rope_scaling="yarn", rope_factor=4.0, max_len=8)  # fmt: skip
    lm = TransformerLM(c).eval()
    pos = lm.layers[0].attn.position
    assert pos.scaling == "yarn" and pos.factor == 4.0 and pos.original_len == 8
    assert lm(torch.randint(1, 30, (2, 32))).logits.shape == (2, 32, 30)  # 4x past L
    with pytest.raises(ValueError, match="position='rope'"):
        TransformerLMConfig(10, 30, rope_scaling="yarn", rope_factor=4.0)
