"""``attnkit experiment scaling``: the softmax statistics against hand computation from the
formulas, the captured queries/keys against the model's own attention weights, the verdict on
synthetic numbers, and clear errors for bad settings."""

import math
from pathlib import Path

import pytest
import torch

from attnkit.experiments.scaling import (
    ScalingConfig,
    parse_ints,
    parse_widths,
    verdict,
)
from attnkit.experiments.scaling_measure import (
    capture,
    random_case,
    row_stats,
    summarise,
)
from attnkit.scores import dot_score, scaled_dot_score

pytestmark = pytest.mark.usefixtures("one_thread_module")


def _hand(q: list[float], ks: list[list[float]], g: list[float], scale: float) -> dict:
    """One row, from the formulas with Python floats: s_j = scale·qᵀk_j, p = softmax(s),
    H = -Σ p log p, ∂L/∂s_j = p_j (g_j - Σ_i p_i g_i), ∂L/∂q = scale·Σ_j ∂L/∂s_j k_j."""
    s = [scale * sum(a * b for a, b in zip(q, k, strict=True)) for k in ks]
    z = sum(math.exp(x) for x in s)
    p = [math.exp(x) / z for x in s]
    h = -sum(x * math.log(x) for x in p)
    pg = sum(a * b for a, b in zip(p, g, strict=True))
    ds = [pj * (gj - pg) for pj, gj in zip(p, g, strict=True)]
    dq = [scale * sum(ds[j] * ks[j][i] for j in range(len(ks))) for i in range(len(q))]
    return {
        "entropy": h,
        "frac": h / math.log(len(ks)),
        "grad_s": math.sqrt(sum(x * x for x in ds)),
        "grad_q": math.sqrt(sum(x * x for x in dq)),
        "max": max(p),
    }


@pytest.mark.parametrize(("fn", "scale"), [(dot_score, 1.0), (scaled_dot_score, 0.5)])
def test_row_stats_match_the_formulas(fn, scale: float) -> None:
    q = [[0.3, -1.2, 0.5, 2.0], [1.0, 0.0, -0.4, 0.7]]
    ks = [[0.1, 0.9, -1.1, 0.4], [-0.6, 0.2, 0.8, 1.5], [1.3, -0.7, 0.0, -0.2]]
    g = [[0.5, -1.0, 2.0], [-0.3, 0.8, 0.1]]
    f64 = {"dtype": torch.float64}
    r = row_stats(torch.tensor([q], **f64), torch.tensor([ks], **f64), fn, torch.tensor([g], **f64))
    for i in range(2):
        want = _hand(q[i], ks, g[i], scale)  # scaled_dot at d_k = 4: 1/√4
        assert float(r.entropy[i]) == pytest.approx(want["entropy"], rel=1e-12)
        assert float(r.entropy_frac[i]) == pytest.approx(want["frac"], rel=1e-12)
        assert float(r.grad_scores[i]) == pytest.approx(want["grad_s"], rel=1e-10)
        assert float(r.grad_queries[i]) == pytest.approx(want["grad_q"], rel=1e-10)
        assert float(r.max_weight[i]) == pytest.approx(want["max"], rel=1e-12)
    assert r.scores.numel() == 6


def test_masked_keys_and_rows_are_left_out() -> None:
    """A masked key is as if absent (entropy / log of the allowed count); rows that are not
    real tokens, or that see one key, are not counted."""
    q = torch.tensor([[[0.3, -1.2], [1.0, 0.5], [0.2, 0.2]]], dtype=torch.float64)  # (1, 3, 2)
    ks = [[0.1, 0.9], [-0.6, 0.2], [1.3, -0.7], [5.0, 5.0]]
    g = torch.tensor([[[0.5, -1.0, 2.0, 9.0]] * 3], dtype=torch.float64)  # (1, 3, 4)
    mask = torch.tensor([[[True, True, True, False]]])  # (1, 1, 4)
    real = torch.tensor([[True, True, False]])
    r = row_stats(q, torch.tensor([ks], dtype=torch.float64), dot_score, g, mask, real)
    assert r.entropy.shape == (2,) and r.scores.numel() == 6
    for i in range(2):
        want = _hand(q[0, i].tolist(), ks[:3], [0.5, -1.0, 2.0], 1.0)
        assert float(r.entropy_frac[i]) == pytest.approx(want["frac"], rel=1e-12)
        assert float(r.grad_scores[i]) == pytest.approx(want["grad_s"], rel=1e-10)
    one = torch.tensor([[[True, False, False, False]]])
    with pytest.raises(ValueError, match="no row with two or more allowed keys"):
        summarise([row_stats(q, torch.tensor([ks]), dot_score, g, one)])


def test_random_case_has_the_footnote_variances() -> None:
    """Footnote 4: q·k of unit-variance components has variance d_k; scaled, variance 1."""
    q, k, up = random_case(256, rows=256, keys=32, queries=16, seed=3)
    assert q.shape == (16, 16, 256) and k.shape == (16, 32, 256) and up.shape == (16, 16, 32)
    s = dot_score(q, k)
    assert float(s.std()) == pytest.approx(16.0, rel=0.1)
    assert float(scaled_dot_score(q, k).std()) == pytest.approx(1.0, rel=0.1)
    again = random_case(256, rows=256, keys=32, queries=16, seed=3)[0]
    assert torch.equal(q, again)


def test_captured_queries_and_keys_give_the_models_own_weights() -> None:
    """softmax(qᵀk/√d_k) on the captured last-layer cross-attention q, k (per head, source
    padding masked) equals the weights the model reports for its real target rows."""
    from attnkit.models import build_model
    from attnkit.normalisers import masked_softmax

    torch.manual_seed(0)
    m = build_model("transformer", src_vocab=13, tgt_vocab=11, preset="tiny", heads=2,
                    dec_layers=2).eval()  # fmt: skip
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 4, 0, 0]])  # (B, S)
    src_len = torch.tensor([5, 3])
    tgt_in = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0]])  # (B, T), padded with 0
    caps = capture(m, src, src_len, tgt_in)
    assert len(caps) == 3  # one encoder self-attention, two decoder cross-attentions
    last = caps[-1]
    assert last.query.shape == (4, 4, 16) and last.keys.shape == (4, 5, 16)
    assert last.rows.tolist() == [[True] * 4] * 2 + [[True, True, False, False]] * 2
    w = masked_softmax(scaled_dot_score(last.query, last.keys), last.mask.expand(4, 4, 5))
    with torch.no_grad():
        want = m.cross_attention(src, src_len, tgt_in)[:, -1]  # (B, H, T, S)
    torch.testing.assert_close(w.reshape(2, 2, 4, 5), want, rtol=1e-5, atol=1e-6)
    enc = caps[0]
    assert enc.rows.tolist()[2] == [True, True, True, False, False]  # example 2, head 1


def _random(ent: list[float], grad: list[float], s_ent: float, s_grad: float) -> dict:
    return {
        d: {
            "dot": {"entropy_frac": e, "grad_scores_median": g},
            "scaled_dot": {"entropy_frac": s_ent, "grad_scores_median": s_grad},
        }
        for d, e, g in zip((4, 64, 1024), ent, grad, strict=True)
    }


def _trained(b_ent: tuple[float, float], loss: tuple[float, float]) -> list[dict]:
    """Two widths; b_ent = the scaled models' unscaled entropy (small, large d_k); loss =
    valid loss (unscaled, scaled) at the large width."""
    out = []
    for d, e in zip((8, 64), b_ent, strict=True):
        for s in ("dot", "scaled_dot"):
            lo = dict(zip(("dot", "scaled_dot"), loss, strict=True))[s] if d == 64 else 1.0
            qk = {"dot": {"entropy_frac": e, "grad_scores_median": e / 10}}
            out.append({"d_k": d, "score": s, "valid_loss": lo, "qk": qk})
    return out


def test_verdict_reproduced() -> None:
    reasons, checks = verdict(
        _random([0.7, 0.2, 0.03], [0.2, 0.1, 1e-4], 0.88, 0.17), _trained((0.8, 0.3), (2.0, 1.0))
    )
    assert reasons == [], reasons
    assert checks["A2_ratio_to_scaled_at_largest"] == pytest.approx(1e-4 / 0.17)
    assert all(checks[f"{c}_ok"] for c in ("A1", "A2", "A3", "B", "C"))


def test_verdict_not_reproduced_names_each_failed_check() -> None:
    reasons, checks = verdict(
        _random([0.7, 0.3, 0.15], [0.2, 0.25, 0.1], 0.88, 0.17), _trained((0.3, 0.5), (1.0, 1.2))
    )
    text = "; ".join(reasons)
    assert "A1 unscaled entropy/log Tk at d_k=1024 is 0.150 (> 0.1)" in text
    assert "A2 unscaled median gradient does not fall at every d_k" in text
    assert "A2 unscaled/scaled median gradient at d_k=1024" in text
    assert "B trained q, k" in text and "C at d_k=64" in text
    assert checks["A3_ok"] and not checks["A1_ok"]  # the scaled side is flat here
    flat_fail = verdict(
        {4: {"dot": {"entropy_frac": 0.5, "grad_scores_median": 0.2},
             "scaled_dot": {"entropy_frac": 0.9, "grad_scores_median": 0.2}},
         64: {"dot": {"entropy_frac": 0.05, "grad_scores_median": 1e-3},
              "scaled_dot": {"entropy_frac": 0.5, "grad_scores_median": 0.2}}},
        _trained((0.8, 0.3), (2.0, 1.0)),
    )[0]  # fmt: skip
    assert len(flat_fail) == 1 and flat_fail[0].startswith("A3 scaled varies over d_k")


def test_settings_parse_and_bad_settings_fail_clearly() -> None:
    assert parse_ints("4, 16,64", "dims") == [4, 16, 64]
    assert parse_widths("2x16,4x32") == [(2, 16), (4, 32)]
    with pytest.raises(ValueError, match="increasing"):
        ScalingConfig(dims="64,16")
    with pytest.raises(ValueError, match="comma-separated integers"):
        ScalingConfig(dims="4,a")
    with pytest.raises(ValueError, match="HEADSxD_K"):
        ScalingConfig(widths="2-16,2x32")
    with pytest.raises(ValueError, match="two or more widths"):
        ScalingConfig(widths="2x16")
    with pytest.raises(ValueError, match="must be even"):
        ScalingConfig(widths="1x3,1x5")
    with pytest.raises(ValueError, match="one-hot"):
        ScalingConfig(keys=1)
    with pytest.raises(ValueError, match="copy, reverse or sort"):
        ScalingConfig(task="toy-ko")
    with pytest.raises(ValueError, match="--steps"):
        ScalingConfig(steps=0)


def test_the_two_runs_differ_only_in_the_score(tmp_path: Path) -> None:
    from attnkit.experiments.scaling_models import train_config

    cfg = ScalingConfig()
    a = train_config(cfg, 2, 64, "dot", tmp_path).to_json()
    b = train_config(cfg, 2, 64, "scaled_dot", tmp_path).to_json()
    assert a["model"]["options"].pop("score") == "dot"
    assert b["model"]["options"].pop("score") == "scaled_dot"
    assert a == b and a["model"]["options"]["dim"] == 128
    assert a["data"]["train_size"] == cfg.steps * cfg.batch_size and a["train"]["epochs"] == 1
