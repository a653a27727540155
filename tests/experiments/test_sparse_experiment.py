"""The sparse experiment (Child 2019; experiments/sparse) and transformer-lm's ``align=``:
the LM with each alignment against a hand-written masked attention (float64), the
factorised kernel taken (a spy), the default unchanged, the checks on planted numbers (each
of the three outcomes), the plateau rule and its design check on planted learning curves,
the early stopping every arm is fit with, the settings; the design checks read the compared
arms (dense, fixed) only, seed by seed; the long-range measure on planted texts and models."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

import attnkit.local.dispatch as dispatch
from attnkit.core import AttentionResult
from attnkit.experiments.evidence import verdict_of
from attnkit.experiments.sparse import SparseConfig
from attnkit.experiments.sparse.checks import (
    checks_of,
    memory_slope,
    plateaued,
    reported,
    runs_of,
    time_slope,
)
from attnkit.experiments.sparse.jobs import make_jobs
from attnkit.experiments.sparse.measure import (
    copy_targets,
    layer_cost,
    long_range_bits,
    valid_curve,
)
from attnkit.models import build_model
from attnkit.models.lm import TransformerLMConfig
from attnkit.registry import STRIDED

L = 3  # stride / radius in the tiny models
N = 11  # sequence length


def allowed(align: str, i: int, j: int, head: int, c: int = 1) -> bool:
    """Child 2019 §4.2's sets (c summary columns), written out; a sliding window of
    radius L; -heads: even heads A⁽¹⁾, odd heads A⁽²⁾."""
    if j > i:
        return False
    if align == "causal":
        return True
    if align == "sliding-causal":
        return i - j <= L
    if align.startswith("strided"):
        first, second = i - j <= L, (i - j) % L == 0
    else:
        first, second = j // L == i // L, j % L >= L - c
    if align.endswith("-heads"):
        return first if head % 2 == 0 else second
    return first or second


def hand_attention(attn, align: str, c: int = 1):  # type: ignore[no-untyped-def]
    """A replacement for one layer's AttentionHeads.forward: softmax(QKᵀ/√Dh + mask) V over
    loops, from its weights (numpy float64)."""

    def forward(x, *args, **kwargs):  # type: ignore[no-untyped-def]
        xs = x.detach().numpy()  # (B, T, D)
        w = {n: (getattr(attn, n).weight.detach().numpy(), getattr(attn, n).bias.detach().numpy())
             for n in ("q_proj", "k_proj", "v_proj", "out_proj")}  # fmt: skip
        q, k, v = (xs @ w[n][0].T + w[n][1] for n in ("q_proj", "k_proj", "v_proj"))
        b, t, d = xs.shape
        h, dh = attn.heads, d // attn.heads
        ctx = np.zeros((b, t, d))
        for bi in range(b):
            for hi in range(h):
                sl = slice(hi * dh, (hi + 1) * dh)
                for i in range(t):
                    ok = [j for j in range(t) if allowed(align, i, j, hi, c)]
                    if not ok:  # no key (fixed, odd head, i < l - 1): a zero context
                        continue
                    e = np.array([q[bi, i, sl] @ k[bi, j, sl] / math.sqrt(dh) for j in ok])
                    a = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
                    ctx[bi, i, sl] = sum(a[n] * v[bi, j, sl] for n, j in enumerate(ok))
        out = ctx @ w["out_proj"][0].T + w["out_proj"][1]
        return AttentionResult(torch.from_numpy(out), None)

    return forward


def tiny(align: str, size: int = L):  # type: ignore[no-untyped-def]
    """The LM with ``align``: ``size`` its stride l (a pattern) or its radius (sliding)."""
    torch.manual_seed(0)
    key = "stride" if align in STRIDED else "window"
    return build_model("transformer-lm", src_vocab=4, tgt_vocab=9, dim=8, heads=2, layers=2,
                       ff=8, dropout=0.0, match_xl=False, align=align,
                       **{key: 0 if align == "causal" else size}).double().eval()  # fmt: skip


ALIGNS = ["causal", "strided-causal", "fixed-causal", "sliding-causal",
          "strided-causal-heads", "fixed-causal-heads"]  # fmt: skip


@pytest.mark.parametrize("align", ALIGNS)
def test_the_lm_with_each_alignment_equals_a_masked_reference(align):
    model = tiny(align)
    ids = torch.randint(1, 9, (2, N), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        fast = model(ids).logits  # (2, N, V)
        for layer in model.layers:
            layer.attn.forward = hand_attention(layer.attn, align)
        ref = model(ids).logits
    assert torch.allclose(fast, ref, atol=1e-10, rtol=1e-10)


def test_a_pattern_differs_from_dense_past_its_reach():
    """The reference would pass a model that ignored align=: the patterns must change the
    output where a query's pattern leaves out keys (i > l)."""
    ids = torch.randint(1, 9, (1, N), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        dense, strided = tiny("causal")(ids).logits, tiny("strided-causal")(ids).logits
    assert torch.allclose(dense[:, : L + 1], strided[:, : L + 1], atol=1e-12)  # all in reach
    assert not torch.allclose(dense[:, L + 1 :], strided[:, L + 1 :], atol=1e-6)


@pytest.mark.parametrize("align", ["strided-causal", "fixed-causal", "strided-causal-heads"])
def test_training_and_the_cost_grid_take_the_factorised_kernel(align, monkeypatch):
    calls = []
    real = dispatch.factorised_attention

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(dispatch, "factorised_attention", spy)
    model = tiny(align).float().train()
    model(torch.randint(1, 9, (2, 16))).logits.sum().backward()
    assert len(calls) == 2  # one per layer
    if align != "strided-causal-heads":
        calls.clear()
        layer_cost(align.split("-")[0], 64, heads=2, head_dim=4, repeats=1)
        assert len(calls) == 2  # warm-up and one timed pass
    monkeypatch.setattr(dispatch, "factorised_attention", real)
    calls.clear()
    tiny("causal").float()(torch.randint(1, 9, (2, 16)))
    assert not calls


def test_the_default_alignment_is_causal_and_unchanged():
    """align= left out builds the causal model of before: same parameters, same logits."""
    torch.manual_seed(0)
    old = build_model("transformer-lm", src_vocab=4, tgt_vocab=9, dim=8, heads=2, layers=2,
                      ff=8, dropout=0.0, match_xl=False).double().eval()  # fmt: skip
    assert old.config.align == "causal" and old.config.window == 0
    ids = torch.randint(1, 9, (2, N), generator=torch.Generator().manual_seed(3))
    assert torch.equal(old(ids).logits, tiny("causal")(ids).logits)
    assert type(old.layers[0].attn.align).__name__ == "CausalAlignment"


def test_lm_alignment_errors_say_what_to_do():
    with pytest.raises(ValueError, match="needs a causal alignment; choose one of causal"):
        TransformerLMConfig(1, 9, dim=8, heads=2, align="strided", stride=3)
    with pytest.raises(ValueError, match="needs stride >= 1"):
        TransformerLMConfig(1, 9, dim=8, heads=2, align="fixed-causal")
    with pytest.raises(ValueError, match="needs window >= 1"):
        TransformerLMConfig(1, 9, dim=8, heads=2, align="sliding-causal")
    with pytest.raises(ValueError, match="use heads >= 2"):
        TransformerLMConfig(1, 9, dim=8, heads=1, align="fixed-causal-heads", stride=2)


def cost(slope: float, noise: float = 0.0) -> dict[str, dict[str, object]]:
    rng = random.Random(0)
    return {str(n): {"saved_bytes": int(100 * n**slope),
                     "seconds": [1e-6 * n**slope * (1 + noise * rng.random()) for _ in range(3)]}
            for n in (1024, 2048, 4096, 8192)}  # fmt: skip


PLATEAU = [3.0, 2.2, 1.8, 1.6, 1.55, 1.56, 1.555, 1.57]  # lowest at 5, then 3 without
RISING = [3.0, 2.5, 2.1, 1.9, 1.8, 1.72, 1.66, 1.61]  # cut by the cap, 0.19 bpc in 3


SEEDS = 5


def planted(gap: float, *, unigram: float = 4.0, spread: float = 0.02,
            sparse_slope: float = 1.5, dense_slope: float = 2.0,
            curves: dict[str, list[list[float]]] | None = None,
            names: dict[str, list[float]] | None = None):  # fmt: skip
    """5 seeds x 16 segments; fixed, strided and the sliding window at dense + gap (noise
    ``spread``, a seed-level offset and per-segment noise); every run on its plateau and
    every arm at 0.2 bits per copied name letter unless ``curves`` / ``names`` say otherwise
    (patience 3)."""
    rng = random.Random(0)
    dense = [[1.5 + spread * rng.gauss(0, 1) for _ in range(16)] for _ in range(SEEDS)]

    def shifted() -> list[list[float]]:
        out = []
        for r in dense:
            offset = spread * rng.gauss(0, 1)
            out.append([x + gap + offset + spread * rng.gauss(0, 1) for x in r])
        return out

    arms = ("dense", "strided", "fixed", "sliding")
    return {"seeds": list(range(SEEDS)),
            "bits": {"dense": dense, "strided": shifted(), "fixed": shifted(),
                     "sliding": shifted()},
            "name_bits": {a: [0.2] * SEEDS for a in arms} | (names or {}),
            "unigram": [unigram] * SEEDS, "patience": 3,
            "curves": {a: [PLATEAU] * SEEDS for a in arms} | (curves or {}),
            "cost": {"dense": cost(dense_slope), "strided": cost(sparse_slope),
                     "fixed": cost(sparse_slope)}}  # fmt: skip


def test_the_checks_give_each_outcome():
    """The claim is the paper's direction on text, with no margin: fixed below dense."""
    assert verdict_of(checks_of(planted(-0.1))) == "REPRODUCED"  # fixed better
    worse = verdict_of(checks_of(planted(0.2)))
    assert worse.startswith("NOT REPRODUCED: fixed bpc - dense bpc"), worse
    straddle = verdict_of(checks_of(planted(0.0, spread=0.1)))
    assert straddle.startswith("INCONCLUSIVE: fixed bpc - dense bpc"), straddle
    assert "holds both" in straddle
    quadratic = verdict_of(checks_of(planted(-0.1, sparse_slope=1.95)))
    assert quadratic.startswith("NOT REPRODUCED: strided memory slope p"), quadratic
    linear = verdict_of(checks_of(planted(-0.1, sparse_slope=1.0)))
    assert linear.startswith("NOT REPRODUCED: strided memory slope p"), linear
    unlearned = verdict_of(checks_of(planted(-0.1, unigram=1.6)))
    assert unlearned.startswith("INCONCLUSIVE: dense bpc / unigram bpc, the worst seed"), unlearned
    blind = verdict_of(checks_of(planted(-0.1, dense_slope=1.4)))
    assert blind.startswith("INCONCLUSIVE: dense memory slope p"), blind


def test_the_quality_interval_is_a_t_interval_over_the_seeds_paired_gaps():
    n = planted(-0.1, spread=0.05)
    check = next(c for c in checks_of(n) if c.name == "fixed bpc - dense bpc")
    gaps = [sum(f) / len(f) - sum(d) / len(d)
            for f, d in zip(n["bits"]["fixed"], n["bits"]["dense"], strict=True)]  # fmt: skip
    mean = sum(gaps) / SEEDS
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (SEEDS - 1))
    half = 2.776445105 * sd / math.sqrt(SEEDS)  # t_{4, .975}
    assert check.value == pytest.approx(mean)
    assert check.ci == pytest.approx((mean - half, mean + half), rel=1e-8)


def test_strided_and_the_sliding_window_are_reported_and_never_judge():
    """Strided worse than dense (Table 2's direction on enwik8), the sliding window never
    converged and without the long-range structure: the verdict is fixed's alone."""
    n = planted(-0.1)
    n["bits"]["strided"] = [[x + 0.3 for x in r] for r in n["bits"]["dense"]]
    n["curves"] |= {"strided": [RISING] * SEEDS, "sliding": [RISING] * SEEDS}
    n["name_bits"] |= {"strided": [4.5] * SEEDS, "sliding": [4.7] * SEEDS}
    assert verdict_of(checks_of(n)) == "REPRODUCED"
    shown = reported(n)
    assert shown["strided"]["gap"][0] == pytest.approx(0.3, abs=1e-4)
    assert set(shown) == {"strided", "sliding"} and len(shown["sliding"]["gaps"]) == SEEDS


def test_design_checks_read_the_compared_arms_per_seed():
    """One dense seed without the long-range structure makes the verdict INCONCLUSIVE
    (seed by seed: the other four far below the line do not average it away)."""
    names = {"dense": [0.1, 0.1, 2.9, 0.1, 0.1]}
    v = verdict_of(checks_of(planted(-0.1, names=names)))
    assert v.startswith("INCONCLUSIVE: dense seeds that learned the long-range structure "
                        "(<= 1 bit per copied name letter): 4 of 5"), v
    assert "not learned: seed 2 (2.90)" in v
    fixed_only = {"fixed": [4.0] * SEEDS}  # fixed's own copying is what the claim measures
    assert verdict_of(checks_of(planted(-0.1, names=fixed_only))) == "REPRODUCED"


def test_slopes_recover_planted_exponents():
    assert memory_slope(cost(1.5)) == pytest.approx(1.5, abs=1e-3)
    exact = time_slope(cost(1.5))
    assert exact.value == pytest.approx(1.5) and exact.hi - exact.lo < 1e-9
    noisy = time_slope(cost(1.5, noise=0.5))
    assert noisy.lo < noisy.value < noisy.hi or noisy.lo == noisy.value or noisy.hi == noisy.value
    assert noisy.hi - noisy.lo > 1e-3


def test_settings_are_checked_as_flags():
    with pytest.raises(ValueError, match=r"^--seeds 0; it must be >= 1$"):
        SparseConfig(seeds=0)
    with pytest.raises(ValueError, match="lacks fixed"):
        SparseConfig(arms="dense,strided")
    assert SparseConfig(arms="dense,fixed").arm_list == ["dense", "fixed"]
    with pytest.raises(ValueError, match="distinct names"):
        SparseConfig(arms="dense,strided,fixed,wavy")
    with pytest.raises(ValueError, match="increasing integers"):
        SparseConfig(cost_n="2048,1024")
    with pytest.raises(ValueError, match="needs at least 257 characters"):
        SparseConfig(test_size=200)
    cfg = SparseConfig()
    assert cfg.stride == 16 and cfg.n_list == [1024, 2048, 4096, 8192]
    got = (cfg.segment, cfg.batch_size, cfg.patience, cfg.epochs, cfg.seeds)
    assert got == (256, 12, 10, 60, 5)


def test_the_plateau_rule():
    """On its plateau: the last ``patience`` validations lowered the best by < 0.01 bpc."""
    assert plateaued(PLATEAU, 3)  # early stopping fired: no lowering in the last 3
    assert not plateaued(RISING, 3)  # cut by the cap while still improving
    creeping = [3.0, 2.0, 1.6, 1.597, 1.594, 1.591]  # 0.009 in the last 3
    assert plateaued(creeping, 3) and not plateaued(creeping, 3, eps=0.005)
    assert not plateaued(creeping[:3], 3)  # no more than patience validations: can't tell
    assert not plateaued([2.0, 1.9], 1) and plateaued([2.0, 1.995], 1)


def test_a_run_short_of_its_plateau_makes_the_verdict_inconclusive():
    for arm in ("dense", "fixed"):
        short = planted(-0.1, curves={arm: [PLATEAU, RISING, PLATEAU, PLATEAU, PLATEAU]})
        short["seeds"] = [10, 11, 12, 13, 14]  # named by seed, not by place
        v = verdict_of(checks_of(short))
        assert v.startswith("INCONCLUSIVE: runs on their valid-bpc plateau: 9 of 10"), v
        assert f"still improving: {arm} seed 11" in v
    worse = verdict_of(checks_of(planted(0.2, curves={"dense": [RISING] * SEEDS})))
    assert worse.startswith("INCONCLUSIVE: runs on their valid-bpc plateau: 5 of 10"), worse


def test_copy_targets_are_the_name_letters_given_in_the_same_window():
    text = "this is abcde. ask abcde. a dog.\nthis is fghij. the cat sees a song. ask fghij.\n"
    first = text.index("ask abcde") + 4
    second = text.index("ask fghij") + 4
    assert copy_targets(text, len(text) - 1) == [*range(first, first + 5),
                                                   *range(second, second + 5)]  # fmt: skip
    given = text.index("fghij")
    cut = copy_targets(text, given - 1)  # fghij given in the window before its "ask"
    assert all(t < given for t in cut) and cut == list(range(first, first + 5))
    assert copy_targets("this is abcde. ask vwxyz.\n", 25) == []  # not the record's name


def test_long_range_bits_reads_the_targets_positions():
    """A model that puts probability 1/2 on the right character at the targets and 1/V
    elsewhere: 1 bit at each target, whatever the others cost."""
    v, length = 8, 5
    ids = torch.arange(16) % v

    class Half(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            nxt = (x + 1) % v  # (B, L): the next id of this arithmetic text
            logits = torch.zeros(*x.shape, v)
            logits.scatter_(-1, nxt[..., None], math.log(v - 1))  # p(next) = 1/2
            return type("Out", (), {"logits": logits})()

    assert long_range_bits(Half(), ids, [3, 7, 11], length) == pytest.approx(1.0)
    assert math.isnan(long_range_bits(Half(), ids, [], length))


def test_runs_of_says_how_each_run_ended():
    runs = runs_of({"dense": [PLATEAU, RISING]}, [4, 5], patience=3, per_epoch=10)["dense"]
    assert runs[0] == {"seed": 4, "updates": 80, "best_update": 50, "best_valid_bpc": 1.55,
                       "ended": "early stopping", "plateau": True}  # fmt: skip
    assert runs[1]["ended"] == "cap" and not runs[1]["plateau"] and runs[1]["best_update"] == 80
    late = runs_of({"fixed": [[3.0, 2.0, 1.5, 1.6, 1.7]]}, [0], patience=3, per_epoch=1)
    assert late["fixed"][0]["ended"] == "cap"  # 2 validations after the lowest, not 3


def test_every_arm_is_fit_with_the_same_early_stopping(tmp_path):
    cfg = SparseConfig(patience=5, epochs=7)
    jobs = make_jobs(cfg, tmp_path)
    assert len(jobs) == 4 * cfg.seeds
    for fc in jobs.values():
        assert (fc.train.patience, fc.train.epochs) == (5, 7)
    with pytest.raises(ValueError, match="--patience 0"):
        SparseConfig(patience=0)


def test_the_learning_curve_is_read_in_bits(tmp_path):
    rows = [{"epoch": 1, "valid_loss": 2 * math.log(2)}, {"epoch": 2, "valid_loss": math.log(2)}]
    (tmp_path / "history.json").write_text(json.dumps(rows))
    assert valid_curve(tmp_path) == [2.0, 1.0]


def test_progress_leaves_out_runs_ended_by_early_stopping(tmp_path, monkeypatch):
    """A run stopped early ends below the cap: the progress line must not show it running."""
    import attnkit.experiments.pool as pool

    jobs = make_jobs(SparseConfig(seeds=1, arms="dense,strided,fixed"), tmp_path)
    done = {"dense-s0": 230, "strided-s0": 460, "fixed-s0": 0}
    monkeypatch.setattr(pool, "steps_done", lambda out: done[out.name])
    line = pool._progress(jobs, 1380, {"dense-s0"})
    assert line == "1/3 trained; strided-s0 460/1380"


def test_calibration_refuses_the_verdicts_seeds(tmp_path):
    from attnkit.experiments.sparse.calibrate import CALIBRATION_SEED, main

    assert CALIBRATION_SEED >= SparseConfig().seed + SparseConfig().seeds
    with pytest.raises(ValueError, match="disjoint from the verdict's"):
        main(["--seed", "3", "--out", str(tmp_path)])


def test_the_position_flag_reaches_every_arm_and_patterns_keep_their_kernel(tmp_path, monkeypatch):
    """--position rope: every arm's model has rotary positions (one choice for all arms), and
    a pattern with RoPE still trains on the factorised kernel (RoPE rotates q and k before
    the alignment, so the pattern and its cost are unchanged)."""
    jobs = make_jobs(SparseConfig(seeds=1, position="rope"), tmp_path)
    assert {fc.model.options["position"] for fc in jobs.values()} == {"rope"}
    assert {fc.model.options["position"] for fc in make_jobs(SparseConfig(seeds=1), tmp_path)
            .values()} == {"sinusoidal"}  # fmt: skip
    with pytest.raises(ValueError, match="--position 'alibi'"):
        SparseConfig(position="alibi")
    calls = []
    real = dispatch.factorised_attention
    monkeypatch.setattr(dispatch, "factorised_attention",
                        lambda *a, **k: calls.append(1) or real(*a, **k))  # fmt: skip
    torch.manual_seed(0)
    model = build_model("transformer-lm", src_vocab=4, tgt_vocab=9, dim=8, heads=2, layers=2,
                        ff=8, dropout=0.0, match_xl=False, align="fixed-causal", stride=L,
                        position="rope")  # fmt: skip
    model(torch.randint(1, 9, (2, 16))).logits.sum().backward()
    assert len(calls) == 2  # one per layer


def test_the_cost_grid_measures_both_patterns_whichever_arms_train(tmp_path):
    """The cost claim is the strided and fixed patterns' (two checks each): with --arms
    dense,fixed (the compared arms alone) the grid still measures strided, and the sliding
    window beside it, and the checks and the report find strided's cost (before: KeyErrors
    after the last run had trained)."""
    from attnkit.experiments.sparse import QUICK, run_experiment

    cfg = SparseConfig(**{**QUICK, "arms": "dense,fixed"})
    result = run_experiment(cfg, tmp_path, say=lambda *a: None)
    assert sorted(result["slopes"]) == ["dense", "fixed", "sliding", "strided"]
    names = [c["name"] for c in result["checks"]]
    assert names.count("strided memory slope p") == 2 and names.count("fixed memory slope p") == 2
    assert sorted(result["bpc"]) == ["dense", "fixed"]
    from attnkit.experiments.sparse.report import report  # the tables, CSV and plot too

    paths = report(result, tmp_path, lambda *a: None)
    assert {p.name for p in paths} >= {"sparse.json", "sparse.csv"}


def test_the_text_knob_reaches_training_and_measurement(tmp_path):
    """--asks shapes every arm's text and the text the test measures (the same seed and
    chance, so the measured windows are the trained text's kind)."""
    from attnkit.experiments.pool import lm_data

    cfg = SparseConfig(seeds=1, asks=0.6)
    assert {fc.data.asks for fc in make_jobs(cfg, tmp_path).values()} == {0.6}
    assert lm_data(cfg, 0, cfg.asks).spec()["asks"] == 0.6
    with pytest.raises(ValueError, match="--asks 1.0: a chance"):
        SparseConfig(asks=1.0)


@pytest.mark.parametrize("align", ["fixed-causal", "fixed-causal-heads"])
def test_the_lm_with_c_summary_columns_equals_a_masked_reference(align):
    """summary=c: the fixed pattern's last c columns of every block (Child 2019 §4.2), here
    c = 2 of l = 3, against the sets written out; and it differs from c = 1."""
    torch.manual_seed(0)
    model = build_model("transformer-lm", src_vocab=4, tgt_vocab=9, dim=8, heads=2, layers=2,
                        ff=8, dropout=0.0, match_xl=False, align=align, stride=L,
                        summary=2).double().eval()  # fmt: skip
    ids = torch.randint(1, 9, (2, N), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        fast = model(ids).logits  # (2, N, V)
        for layer in model.layers:
            layer.attn.forward = hand_attention(layer.attn, align, c=2)
        ref = model(ids).logits
        one = tiny(align)(ids).logits  # c = 1, the same weights (seed 0)
    assert torch.allclose(fast, ref, atol=1e-10, rtol=1e-10)
    assert not torch.allclose(fast, one, atol=1e-6)
    with pytest.raises(ValueError, match="summary columns c must be in 1 .. stride"):
        build_model("transformer-lm", src_vocab=4, tgt_vocab=9, dim=8, heads=2, layers=1,
                    ff=8, match_xl=False, align=align, stride=L, summary=4)  # fmt: skip
    with pytest.raises(ValueError, match="align='causal' has none"):
        build_model("transformer-lm", src_vocab=4, tgt_vocab=9, dim=8, heads=2, layers=1,
                    ff=8, match_xl=False, summary=2)  # fmt: skip


def test_summary_reaches_the_fixed_arm_and_its_cost(tmp_path):
    """--summary c: the fixed arm's model and its one-layer cost use c summary columns; the
    other arms have none; c beyond the stride is one line."""
    cfg = SparseConfig(seeds=1, summary=4, arms="dense,strided,fixed")
    opts = {name: fc.model.options for name, fc in make_jobs(cfg, tmp_path).items()}
    assert opts["fixed-s0"]["summary"] == 4
    assert "summary" not in opts["dense-s0"] and "summary" not in opts["strided-s0"]
    one = layer_cost("fixed", 64, heads=2, head_dim=4, repeats=1)["saved_bytes"]
    four = layer_cost("fixed", 64, heads=2, head_dim=4, repeats=1, summary=4)["saved_bytes"]
    assert four > one  # each query reaches c columns of every earlier block
    with pytest.raises(ValueError, match="--summary 17: .* 1 .. l = 16"):
        SparseConfig(summary=17)


def test_the_long_run_reads_as_its_page_says():
    """sparse-long.json (the long run, settings written down before it ran): its checks
    recomputed from its stored numbers give its verdict, and the page's claim interval,
    per-seed bpc and bits per copied letter are the JSON's."""
    from pathlib import Path

    from attnkit.experiments import evidence as ev
    from attnkit.experiments.sparse.checks import checks_of

    docs = Path(__file__).resolve().parents[2] / "docs" / "experiments"
    run = json.loads((docs / "sparse-long.json").read_text())
    assert run["config"]["asks"] == 0.6 and run["config"]["arms"] == "dense,fixed"
    again = ev.judged(checks_of(run["numbers"]))
    assert again["verdict"] == run["verdict"] and run["verdict"].startswith("INCONCLUSIVE")
    assert "still improving: fixed seed 2, fixed seed 3" in run["verdict"]
    # as run, the check named runs by place from 1; only that text differs
    assert run["verdict_as_run"] == run["verdict"].replace("seed 2, fixed seed 3",
                                                           "seed #3, fixed seed #4")
    gap = {c["name"]: c for c in run["checks"]}["fixed bpc - dense bpc"]
    page = (docs / "sparse.md").read_text()
    value, lo, hi = (f"{x:+.3f}" for x in (gap["value"], *gap["ci"]))
    assert f"{value} bpc [{lo}, {hi}]" in page
    for arm in ("dense", "fixed"):
        assert ", ".join(f"{b:.3f}" for b in run["bpc"][arm]) in page
        assert ", ".join(f"{b:.2f}" for b in run["name_bits"][arm]).replace("1.61", "**1.61**") \
            in page  # fmt: skip
