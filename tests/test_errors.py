"""Bad input at the public entry points raises ValueError/TypeError whose message names the
shapes (or values) involved and says what to do, instead of a deep torch traceback."""

import pytest
import torch

import attnkit
import attnkit.nn as ann
from attnkit import (
    Attention,
    AttentionHeads,
    CosineScore,
    DotScore,
    LocalM,
    LocalP,
    LocationScore,
    MultiDimensionalAttention,
    SlidingWindow,
    attend,
)
from attnkit.registry import build_alignment, build_normaliser, build_score
from attnkit.stages.normalisers import entmax15, masked_softmax, sparsemax

pytestmark = pytest.mark.usefixtures("one_thread")

Q = torch.randn(2, 3, 4)  # (B, Tq, D)
K = torch.randn(2, 5, 4)  # (B, Tk, D)


def _bad(x: torch.Tensor, value: float) -> torch.Tensor:
    x = x.clone()
    x[0, 1, 2] = value
    return x


# --------------------------------------------------------------------------------- batch sizes


def test_attend_mismatched_batch() -> None:
    k = torch.randn(3, 5, 4)
    with pytest.raises(ValueError, match=r"batch dims differ: query \(2, 3, 4\), keys \(3, 5, 4\)"):
        attend(Q, k, k)


def test_multihead_mismatched_batch_names_input_shapes() -> None:
    with pytest.raises(
        ValueError, match=r"batch sizes differ: query \(2, 3, 4\), keys \(3, 5, 4\)"
    ):
        AttentionHeads(4, 2)(Q, torch.randn(3, 5, 4))


def test_nn_multihead_mismatched_batch() -> None:
    m = ann.MultiheadAttention(4, 2, batch_first=True)
    k = torch.randn(3, 5, 4)
    with pytest.raises(ValueError, match=r"batch sizes differ: .*\(B, L, E\)"):
        m(Q, k, k)


def test_values_must_match_keys() -> None:
    with pytest.raises(ValueError, match=r"keys have Tk=5 but values have 3 positions"):
        attend(Q, K, K[:, :3])


# -------------------------------------------------------------------------------------- widths


@pytest.mark.parametrize(
    "score", [None, DotScore(), CosineScore(), attnkit.stages.scores.dot_score]
)
def test_same_width_scores_reject_different_widths(score) -> None:
    k = torch.randn(2, 5, 6)
    kw = {} if score is None else {"score": score}
    with pytest.raises(ValueError, match=r"query has width 4 but 6 .* use GeneralScore"):
        attend(Q, k, k, **kw)


def test_module_width_mismatch() -> None:
    with pytest.raises(ValueError, match=r"keys has width 6 but this module expects 4"):
        AttentionHeads(4, 2)(Q, torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match=r"key has width 6 but this module was built for 4"):
        ann.MultiheadAttention(4, 2, batch_first=True)(
            Q, torch.randn(2, 5, 6), torch.randn(2, 5, 4)
        )
    with pytest.raises(ValueError, match=r"query has width 4 but 6 was expected; see LocalP"):
        attend(Q, K, K, align=LocalP(6, 2))
    with pytest.raises(ValueError, match=r"values has width 4 but 3 was expected"):
        MultiDimensionalAttention(4, value_dim=3)(Q, K)


# ----------------------------------------------------------------------------------------- masks


def test_mask_of_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"mask of shape \(2, 3, 4\) .* \(2, 3, 5\).*padding_mask"):
        attend(Q, K, K, mask=torch.ones(2, 3, 4, dtype=torch.bool))


def test_mask_that_would_grow_the_result() -> None:
    q, k = Q[:1], K[:1]
    with pytest.raises(ValueError, match=r"mask of shape \(3, 3, 5\) does not broadcast"):
        attend(q, k, k, mask=torch.ones(3, 3, 5, dtype=torch.bool))


def test_multihead_mask_of_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"mask of shape .* does not broadcast"):
        AttentionHeads(4, 2)(Q, K, mask=torch.ones(2, 3, 4, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_mask_of_wrong_dtype(dtype) -> None:
    mask = torch.ones(2, 3, 5, dtype=dtype)
    with pytest.raises(TypeError, match=rf"mask has dtype {dtype}.*mask.bool\(\)"):
        attend(Q, K, K, mask=mask)
    with pytest.raises(TypeError, match=r"mask has dtype"):
        AttentionHeads(4, 2)(Q, K, mask=mask)
    for fn in (masked_softmax, sparsemax, entmax15):
        with pytest.raises(TypeError, match=r"mask has dtype"):
            fn(torch.randn(2, 3, 5), mask)


def test_mask_not_a_tensor() -> None:
    with pytest.raises(TypeError, match="mask must be a bool torch.Tensor or None, got list"):
        AttentionHeads(4, 2)(Q, K, mask=[[True]])
    with pytest.raises(TypeError, match="mask must be a bool torch.Tensor"):
        attend(Q, K, K, mask=[[True]])


def test_nn_multihead_masks() -> None:
    m = ann.MultiheadAttention(4, 2, batch_first=True)
    with pytest.raises(ValueError, match=r"attn_mask has shape \(4, 4\); expected \(L, S\)"):
        m(Q, K, K, attn_mask=torch.zeros(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(2, 4\); expected"):
        m(Q, K, K, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="attn_mask must be bool or float"):
        m(Q, K, K, attn_mask=torch.zeros(3, 5, dtype=torch.int64))
    with pytest.raises(TypeError, match="key_padding_mask must be bool or float"):
        m(Q, K, K, key_padding_mask=torch.zeros(2, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match="must all be 3-D"):
        m(Q, K[0], K[0])


def test_padding_mask_bad_lengths() -> None:
    with pytest.raises(TypeError, match="lengths must be integers"):
        attnkit.padding_mask(torch.tensor([1.0]))
    with pytest.raises(ValueError, match=r"lengths must be >= 0"):
        attnkit.padding_mask(torch.tensor([-1]))
    with pytest.raises(ValueError, match=r"a length exceeds max_len=2"):
        attnkit.padding_mask(torch.tensor([3]), 2)


# ------------------------------------------------------------------------- windows and heads


@pytest.mark.parametrize(
    "make",
    [
        lambda: SlidingWindow(-1),
        lambda: SlidingWindow(-1, causal=True),
        lambda: LocalM(-2),
        lambda: LocalP(4, -2),
        lambda: attnkit.band_mask(3, 3, -1),
        lambda: attnkit.build("dot", dim=4, align="local-m", window=-1),
    ],
)
def test_negative_window(make) -> None:
    with pytest.raises(ValueError, match=r"=-\d is negative; a window radius must be >= 0"):
        make()


def test_window_wrong_type_and_local_p_zero() -> None:
    with pytest.raises(TypeError, match="window must be an int"):
        LocalM(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="local-p needs window >= 1"):
        LocalP(4, 0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: AttentionHeads(6, 4),
        lambda: ann.MultiheadAttention(6, 4),
        lambda: attnkit.build("dot", dim=6, heads=4),
    ],
)
def test_heads_must_divide_width(make) -> None:
    with pytest.raises(ValueError, match=r"heads=4 does not divide the width 6; pick heads from"):
        make()


def test_zero_heads() -> None:
    with pytest.raises(ValueError, match="heads=0; need at least one head"):
        AttentionHeads(4, 0)


# --------------------------------------------------------------------- empty keys, NaN, Inf


@pytest.mark.parametrize(
    "call",
    [
        lambda k: attend(Q, k, k),
        lambda k: Attention()(Q, k),
        lambda k: AttentionHeads(4, 2)(Q, k),
        lambda k: ann.MultiheadAttention(4, 2, batch_first=True)(Q, k, k),
        lambda k: MultiDimensionalAttention(4)(Q, k),
    ],
    ids=["attend", "Attention", "AttentionHeads", "nn.MultiheadAttention", "multidim"],
)
def test_empty_key_sequence(call) -> None:
    with pytest.raises(ValueError, match=r"empty key sequence \(keys .*0.*\).*at least one key"):
        call(K[:, :0])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_inputs(value: float) -> None:
    """Under attnkit.set_checks("full") (opt-in: one host sync per check on a GPU)."""
    with attnkit.checks("full"):
        _non_finite_inputs_raise(value)
    with pytest.raises(ValueError, match=r"query contains NaN or Inf"):  # one call opts in
        attend(_bad(Q, value), K, K, check_finite=True)


def _non_finite_inputs_raise(value: float) -> None:
    with pytest.raises(ValueError, match=r"query contains NaN or Inf.*check_finite=False"):
        attend(_bad(Q, value), K, K)
    with pytest.raises(ValueError, match=r"keys contains NaN or Inf"):
        attend(Q, _bad(K, value), K)
    with pytest.raises(ValueError, match=r"values contains NaN or Inf"):
        attend(Q, K, _bad(K, value))
    with pytest.raises(ValueError, match=r"contains NaN or Inf"):
        AttentionHeads(4, 2)(_bad(Q, value))
    with pytest.raises(ValueError, match=r"contains NaN or Inf"):
        ann.MultiheadAttention(4, 2, batch_first=True)(Q, _bad(K, value), K)
    with pytest.raises(ValueError, match=r"contains NaN or Inf"):
        MultiDimensionalAttention(4)(Q, _bad(K, value))


def test_check_finite_can_be_disabled() -> None:
    with attnkit.checks("full"):
        out = attend(_bad(Q, float("nan")), K, K, check_finite=False)
    assert torch.isnan(out.context[0, 1]).all()


def test_the_default_level_checks_shapes_only() -> None:
    """The default ("shapes", or ATTNKIT_CHECKS) reads no data: NaN passes through."""
    assert attnkit.get_checks() == "shapes"
    assert torch.isnan(attend(_bad(Q, float("nan")), K, K).context[0, 1]).all()
    with pytest.raises(ValueError, match=r"set_checks\(mode\)='some'; choose 'shapes'"):
        attnkit.set_checks("some")
    with attnkit.checks("full"):
        assert attnkit.get_checks() == "full"
    assert attnkit.get_checks() == "shapes"


def test_non_float_and_mixed_dtypes() -> None:
    with pytest.raises(TypeError, match=r"query has dtype torch.int64.*query.float\(\)"):
        attend(Q.long(), K, K)
    with pytest.raises(TypeError, match="cast them to one dtype"):
        attend(Q.double(), K, K)
    with pytest.raises(TypeError, match="query must be a torch.Tensor"):
        attend([1.0], K, K)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"query has shape \(4,\); expected at least 2 dims"):
        attend(Q[0, 0], K, K)


# ------------------------------------------------------------------ registry and location


@pytest.mark.parametrize(
    "call,fragment",
    [
        (lambda: attnkit.build("nope", dim=4), "unknown score 'nope'; choose one of"),
        (lambda: attnkit.build(dim=4, align="nope"), "unknown alignment 'nope'; choose one of"),
        (lambda: attnkit.build(dim=4, normaliser="nope"), "unknown normaliser 'nope'"),
        (lambda: build_score("nope", 4), "unknown score"),
        (lambda: build_alignment("nope", 4), "unknown alignment"),
        (lambda: build_normaliser("nope"), "unknown normaliser"),
        (lambda: attnkit.build(dim=4, align="local-p"), "needs window=...; pass it"),
        (lambda: attnkit.build("location", dim=4), "needs max_keys=..."),
    ],
)
def test_registry_errors(call, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        call()


def test_location_score_more_keys_than_max_keys() -> None:
    msg = r"built for at most 3 keys but got 5; build LocationScore with a larger max_keys"
    with pytest.raises(ValueError, match=msg):
        attend(Q, K, K, score=LocationScore(4, max_keys=3))
    with pytest.raises(ValueError, match=msg):
        attnkit.build("location", dim=4, max_keys=3)(Q, K)
    with pytest.raises(ValueError, match=msg):
        attnkit.build("location", dim=4, max_keys=3, heads=2)(Q, K)


def test_mask_with_more_dims_than_scores() -> None:
    with pytest.raises(ValueError, match=r"mask of shape \(1, 2, 3, 5\) does not broadcast"):
        attend(Q, K, K, mask=torch.ones(1, 2, 3, 5, dtype=torch.bool))


def test_inputs_and_masks_on_other_devices_get_a_clear_error() -> None:
    """On a GPU a CPU mask (or keys) would fail deep inside torch; checked from the metadata
    (the "meta" device stands in for a second device here)."""
    from attnkit.local import sliding_window_attention

    q, k, v = (torch.randn(2, 5, 8, device="meta") for _ in range(3))
    with pytest.raises(ValueError, match=r"query, keys and values are on meta, cpu, meta"):
        attnkit.attend(q, torch.randn(2, 5, 8), v)
    mask = torch.ones(2, 1, 5, dtype=torch.bool)  # on the CPU
    with pytest.raises(ValueError, match=r"mask is on cpu but the attention runs on meta"):
        attnkit.attend(q, k, v, mask=mask)
    with pytest.raises(ValueError, match=r"mask\.to\(query\.device\)"):
        sliding_window_attention(q, k, v, 2, mask=mask)
