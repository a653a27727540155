"""``attnkit experiment scaling``: the softmax statistics against hand computation from the
formulas, the captured queries/keys against the model's own attention weights, the checks and
verdict on hand-made numbers (clean, contrary, straddling, unlearned, a reported width at the
floor, a cap too near the stops), the --quick run, and clear errors for bad settings."""

import math
from pathlib import Path

import pytest
import torch
from _refusals import refused

from attnkit.experiments import evidence as ev
from attnkit.experiments.scaling import (
    ScalingConfig,
    checks_of,
    parse_ints,
    parse_widths,
)
from attnkit.experiments.scaling.measure import (
    capture,
    random_case,
    row_stats,
    summarise,
)
from attnkit.stages.scores import dot_score, scaled_dot_score

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
    from attnkit.stages.normalisers import masked_softmax

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


def _random(grad: list[float], scaled: float, noise: float = 0.0) -> dict:
    """Five draws of (a) at d_k 4, 16, 64, 1024: the unscaled median gradients ``grad`` (each
    draw times 1 ± noise), the scaled one flat at ``scaled``."""
    return {
        s: {
            d: {"dot": {"grad_scores_median": g * (1 + noise * (s - 2))},
                "scaled_dot": {"grad_scores_median": scaled * (1 + 0.01 * (s - 2))}}
            for d, g in zip((4, 16, 64, 1024), grad, strict=True)
        }
        for s in range(5)
    }  # fmt: skip


def _trained(gap: float, spread: float, bleu: float = 50.0, *, small_bleu: float | None = None,
             stops: int = 1500, censored: bool = False) -> list[dict]:  # fmt: skip
    """Five seeds at two widths; at the large one the unscaled arm's per-example test loss is
    the scaled one's + gap, each seed's moved by ± spread (alternating over seeds); every run
    stopped after ``stops`` updates (``censored``: cut by the cap); BLEU ``bleu`` at the
    large width, ``small_bleu`` (default the same) at the small one."""
    out = []
    for seed in range(5):
        base = [1.0 + 0.01 * i for i in range(40)]
        for s in ("dot", "scaled_dot"):
            shift = gap + spread * (-1) ** seed if s == "dot" else 0.0
            for d in (8, 64):
                losses = [b + shift for b in base] if d == 64 else base
                out.append({"d_k": d, "score": s, "seed": seed, "test_losses": losses,
                            "test_bleu": bleu if d == 64 or small_bleu is None else small_bleu,
                            "updates": stops, "censored": censored})  # fmt: skip
    return out


CAP = 6000


def test_a_clean_result_reproduces() -> None:
    """The gradient rises from d_k 4 to 16 (as any softmax does) and falls from 16 on: the
    fall is checked from d_k 16 only, so the rise does not count."""
    checks = checks_of(_random([0.21, 0.22, 0.11, 1e-4], 0.17, noise=0.02), _trained(0.5, 0.1), CAP)
    assert [c.name for c in checks if c.name.startswith("A ")] == [
        "A unscaled median gradient falls, d_k 16 -> 64 (log ratio)",
        "A unscaled median gradient falls, d_k 64 -> 1024 (log ratio)"]  # fmt: skip
    assert all(c.outcome == ev.PASS for c in checks), [c.reason for c in checks]
    a2 = next(c for c in checks if c.name.startswith("A2"))
    assert a2.value == pytest.approx(1e-4 / 0.17, rel=1e-3) and a2.threshold == 0.1
    assert ev.verdict_of(checks) == ev.REPRODUCED
    assert all(set(c.as_json()) >= {"name", "value", "ci", "threshold", "outcome"}
               for c in checks)  # fmt: skip


def test_a_clean_contrary_result_is_not_reproduced() -> None:
    """The unscaled gradient does not fall, stays near the scaled one, and the unscaled
    Transformer is ahead: every claim fails on its interval."""
    random = _random([0.21, 0.11, 0.15, 0.16], 0.17, noise=0.02)
    checks = checks_of(random, _trained(-0.5, 0.1), CAP)
    got = {c.name: c.outcome for c in checks}
    assert got["A unscaled median gradient falls, d_k 64 -> 1024 (log ratio)"] == ev.FAIL
    assert got["A2 unscaled / scaled median gradient at d_k 1024"] == ev.FAIL
    assert got["C test loss unscaled - scaled at d_k 64"] == ev.FAIL
    verdict = ev.verdict_of(checks)
    assert verdict.startswith("NOT REPRODUCED: A unscaled median gradient falls, d_k 16")
    assert ev.exit_code(verdict) == 1


def test_a_straddling_gap_or_an_unlearned_task_is_inconclusive() -> None:
    """A trained gap whose interval holds 0, or arms that never learned the task (BLEU below
    20), give INCONCLUSIVE, never NOT REPRODUCED."""
    random = _random([0.21, 0.22, 0.11, 1e-4], 0.17, noise=0.02)
    straddle = checks_of(random, _trained(0.01, 1.0), CAP)
    c = next(c for c in straddle if c.name.startswith("C "))
    assert c.outcome == ev.INCONCLUSIVE and c.ci[0] < 0 < c.ci[1]
    assert ev.verdict_of(straddle).startswith("INCONCLUSIVE: C test loss")
    floor = checks_of(random, _trained(-0.5, 0.1, bleu=3.0), CAP)  # C fails, nothing learned
    verdict = ev.verdict_of(floor)
    assert verdict.startswith("INCONCLUSIVE: L best arm's mean test BLEU") and \
        ev.exit_code(verdict) == 2  # fmt: skip


def test_only_the_compared_width_is_checked_and_the_cap_must_clear_the_stops() -> None:
    """The smaller width (reported only) at the floor withholds nothing; the compared width
    at the floor makes the verdict INCONCLUSIVE (test above); a cap under 3x the median stop of a
    compared arm does too, naming the censored runs."""
    random = _random([0.21, 0.22, 0.11, 1e-4], 0.17, noise=0.02)
    context = checks_of(random, _trained(0.5, 0.1, small_bleu=0.0), CAP)
    assert ev.verdict_of(context) == ev.REPRODUCED
    c = next(c for c in context if c.name.startswith("C "))
    gaps = [0.5 + 0.1 * (-1) ** s for s in range(5)]  # per-seed: a t-interval over 5 seeds
    assert c.value == pytest.approx(sum(gaps) / 5) and c.ci[0] == pytest.approx(
        ev.t_interval(gaps).lo)
    short = ev.verdict_of(checks_of(random, _trained(0.5, 0.1, stops=6000, censored=True), CAP))
    assert short.startswith("INCONCLUSIVE: P dot at d_k 64: cap / median stopping point: cap "
                            "6000 / median stop 6000 = 1, needs >= 3; 5 of 5 runs censored")


def test_the_quick_run_writes_its_checks(tmp_path: Path) -> None:
    from attnkit.experiments.scaling import QUICK, run_experiment

    result = run_experiment(ScalingConfig(**QUICK), tmp_path, say=lambda _: None)
    names = [c["name"] for c in result["checks"]]
    assert names[0] == "A unscaled median gradient falls, d_k 16 -> 64 (log ratio)"
    assert {c["outcome"] for c in result["checks"]} <= {ev.PASS, ev.FAIL, ev.INCONCLUSIVE}
    assert all(len(c["ci"]) == 2 and c["ci"][0] <= c["value"] <= c["ci"][1]
               for c in result["checks"])  # fmt: skip
    assert ev.exit_code(result["verdict"]) in (0, 1, 2)
    assert {r["seed"] for r in result["trained"]} == {0, 1} and len(result["trained"]) == 8
    assert sorted(result["random_seeds"]) == ["0", "1"]


test_bad_settings_fail_clearly = refused(ScalingConfig, [
    ({"dims": "64,16"}, "increasing"),
    ({"dims": "4,a"}, "comma-separated integers"),
    ({"widths": "2-16,2x32"}, "HEADSxD_K"),
    ({"widths": "2x16"}, "two or more widths"),
    ({"widths": "1x3,1x5"}, "must be even"),
    ({"keys": 1}, "one-hot"),
    ({"task": "toy-ko"}, "copy, reverse or sort"),
    ({"steps": 0}, "--steps"),
    ({"dims": "4,8,16"}, "two or more d_k >= 16"),
    ({"seeds": 1}, "--seeds must be at least 2"),
    ({"steps": 650}, "not a multiple of --epoch-steps"),
])


def test_settings_parse() -> None:
    assert parse_ints("4, 16,64", "dims") == [4, 16, 64]
    assert parse_widths("2x16,4x32") == [(2, 16), (4, 32)]


def test_the_two_runs_differ_only_in_the_score(tmp_path: Path) -> None:
    from attnkit.experiments.scaling.jobs import fit_config

    cfg = ScalingConfig()
    a = fit_config(cfg, 2, 64, "dot", 1, tmp_path).to_json()
    b = fit_config(cfg, 2, 64, "scaled_dot", 1, tmp_path).to_json()
    assert a["model"]["options"].pop("score") == "dot"
    assert b["model"]["options"].pop("score") == "scaled_dot"
    assert a == b and a["model"]["options"]["dim"] == 128
    assert a["data"]["train_size"] == cfg.epoch_steps * cfg.batch_size
    assert a["train"]["epochs"] * cfg.epoch_steps == cfg.steps  # the same cap for both
    assert a["train"]["patience"] == cfg.patience > 0 and a["train"]["seed"] == 1


def test_a2_and_a3_are_reported_and_judge_nothing() -> None:
    """A2 ("extremely small": < 0.1× the scaled gradient) and A3 (scaled flat within 1.25×)
    put numbers on words the paper leaves unquantified: reported beside A, outside the
    verdict. Here both fail (the unscaled gradient falls to half the scaled one only, the
    scaled one spreads 3×) while A and C hold: the verdict is A's and C's."""
    random = _random([0.21, 0.22, 0.15, 0.08], 0.17, noise=0.02)
    for s, draw in random.items():
        draw[1024]["scaled_dot"]["grad_scores_median"] = 0.5 * (1 + 0.01 * s)
    checks = checks_of(random, _trained(0.5, 0.1), CAP)
    a2, a3 = (next(c for c in checks if c.name.startswith(p)) for p in ("A2", "A3"))
    assert (a2.kind, a3.kind) == ("report", "report")
    assert a2.outcome == ev.FAIL and a3.outcome == ev.FAIL
    assert "a threshold the paper does not set" in a2.reason
    assert ev.verdict_of(checks) == ev.REPRODUCED
