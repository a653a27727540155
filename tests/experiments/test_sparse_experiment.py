"""The sparse experiment (Child 2019; experiments/sparse) and transformer-lm's ``align=``:
the LM with each alignment against a hand-written masked attention (float64), the
factorised kernel taken (a spy), the default unchanged, the checks on planted numbers (each
of the three outcomes), the plateau rule and its design check on planted learning curves,
the early stopping every arm is fit with, the settings."""

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
    runs_of,
    time_slope,
)
from attnkit.experiments.sparse.jobs import make_jobs
from attnkit.experiments.sparse.measure import layer_cost, valid_curve
from attnkit.models import build_model
from attnkit.models.lm import TransformerLMConfig

L = 3  # stride / radius in the tiny models
N = 11  # sequence length


def allowed(align: str, i: int, j: int, head: int) -> bool:
    """Child 2019 §4.2's sets (c = 1 summary column), written out; a sliding window of
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
        first, second = j // L == i // L, j % L >= L - 1
    if align.endswith("-heads"):
        return first if head % 2 == 0 else second
    return first or second


def hand_attention(attn, align: str):  # type: ignore[no-untyped-def]
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
                    ok = [j for j in range(t) if allowed(align, i, j, hi)]
                    if not ok:  # no key (fixed, odd head, i < l - 1): a zero context
                        continue
                    e = np.array([q[bi, i, sl] @ k[bi, j, sl] / math.sqrt(dh) for j in ok])
                    a = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
                    ctx[bi, i, sl] = sum(a[n] * v[bi, j, sl] for n, j in enumerate(ok))
        out = ctx @ w["out_proj"][0].T + w["out_proj"][1]
        return AttentionResult(torch.from_numpy(out), None)

    return forward


def tiny(align: str, window: int = L):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    return build_model("transformer-lm", src_vocab=4, tgt_vocab=9, dim=8, heads=2, layers=2,
                       ff=8, dropout=0.0, match_xl=False, align=align,
                       window=0 if align == "causal" else window).double().eval()  # fmt: skip


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
        TransformerLMConfig(1, 9, dim=8, heads=2, align="strided", window=3)
    with pytest.raises(ValueError, match="needs window >= 1"):
        TransformerLMConfig(1, 9, dim=8, heads=2, align="fixed-causal")
    with pytest.raises(ValueError, match="use heads >= 2"):
        TransformerLMConfig(1, 9, dim=8, heads=1, align="fixed-causal-heads", window=2)


def cost(slope: float, noise: float = 0.0) -> dict[str, dict[str, object]]:
    rng = random.Random(0)
    return {str(n): {"saved_bytes": int(100 * n**slope),
                     "seconds": [1e-6 * n**slope * (1 + noise * rng.random()) for _ in range(3)]}
            for n in (1024, 2048, 4096, 8192)}  # fmt: skip


PLATEAU = [3.0, 2.2, 1.8, 1.6, 1.55, 1.56, 1.555, 1.57]  # lowest at 5, then 3 without
RISING = [3.0, 2.5, 2.1, 1.9, 1.8, 1.72, 1.66, 1.61]  # cut by the cap, 0.19 bpc in 3


def planted(gap: float, *, unigram: float = 4.0, spread: float = 0.02,
            sparse_slope: float = 1.5, dense_slope: float = 2.0,
            curves: dict[str, list[list[float]]] | None = None):  # fmt: skip
    """3 seeds x 16 segments; strided and fixed at dense + gap (noise ``spread``); every run
    on its plateau unless ``curves`` says otherwise (patience 3)."""
    rng = random.Random(0)
    dense = [[1.5 + spread * rng.gauss(0, 1) for _ in range(16)] for _ in range(3)]
    shifted = lambda: [[x + gap + spread * rng.gauss(0, 1) for x in r] for r in dense]  # noqa: E731
    return {"bits": {"dense": dense, "strided": shifted(), "fixed": shifted()},
            "unigram": [unigram] * 3, "patience": 3,
            "curves": {a: [PLATEAU] * 3 for a in ("dense", "strided", "fixed")} | (curves or {}),
            "cost": {"dense": cost(dense_slope), "strided": cost(sparse_slope),
                     "fixed": cost(sparse_slope)}}  # fmt: skip


def test_the_checks_give_each_outcome():
    assert verdict_of(checks_of(planted(0.0))) == "REPRODUCED"
    assert verdict_of(checks_of(planted(-0.1))) == "REPRODUCED"  # sparse better
    worse = verdict_of(checks_of(planted(0.2)))
    assert worse.startswith("NOT REPRODUCED: strided bpc - dense bpc"), worse
    quadratic = verdict_of(checks_of(planted(0.0, sparse_slope=1.95)))
    assert quadratic.startswith("NOT REPRODUCED: strided memory slope p"), quadratic
    linear = verdict_of(checks_of(planted(0.0, sparse_slope=1.0)))
    assert linear.startswith("NOT REPRODUCED: strided memory slope p"), linear
    straddle = verdict_of(checks_of(planted(0.05, spread=0.3)))
    assert straddle.startswith("INCONCLUSIVE: strided bpc - dense bpc"), straddle
    assert "holds both" in straddle
    unlearned = verdict_of(checks_of(planted(0.0, unigram=1.6)))
    assert unlearned.startswith("INCONCLUSIVE: dense bpc / unigram bpc"), unlearned
    blind = verdict_of(checks_of(planted(0.0, dense_slope=1.4)))
    assert blind.startswith("INCONCLUSIVE: dense memory slope p"), blind


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
    with pytest.raises(ValueError, match="distinct names"):
        SparseConfig(arms="dense,strided,fixed,wavy")
    with pytest.raises(ValueError, match="increasing integers"):
        SparseConfig(cost_n="2048,1024")
    with pytest.raises(ValueError, match="needs at least 1025 characters"):
        SparseConfig(test_size=1000)
    cfg = SparseConfig()
    assert cfg.stride == 32 and cfg.n_list == [1024, 2048, 4096, 8192]


def test_the_plateau_rule():
    """On its plateau: the last ``patience`` validations lowered the best by < 0.01 bpc."""
    assert plateaued(PLATEAU, 3)  # early stopping fired: no lowering in the last 3
    assert not plateaued(RISING, 3)  # cut by the cap while still improving
    creeping = [3.0, 2.0, 1.6, 1.597, 1.594, 1.591]  # 0.009 in the last 3
    assert plateaued(creeping, 3) and not plateaued(creeping, 3, eps=0.005)
    assert not plateaued(creeping[:3], 3)  # no more than patience validations: can't tell
    assert not plateaued([2.0, 1.9], 1) and plateaued([2.0, 1.995], 1)


def test_a_run_short_of_its_plateau_makes_the_verdict_inconclusive():
    for arm in ("dense", "strided", "fixed"):
        short = planted(0.0, curves={arm: [PLATEAU, RISING, PLATEAU]})
        v = verdict_of(checks_of(short))
        assert v.startswith("INCONCLUSIVE: runs on their valid-bpc plateau: 8 of 9"), v
        assert f"still improving: {arm} seed #2" in v
    worse = verdict_of(checks_of(planted(0.2, curves={"dense": [RISING] * 3})))
    assert worse.startswith("INCONCLUSIVE: runs on their valid-bpc plateau: 6 of 9"), worse
    # the sliding window is reported, not compared: its curve is not checked
    slid = planted(0.0, curves={"sliding": [RISING] * 3})
    assert verdict_of(checks_of(slid)) == "REPRODUCED"


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
    assert len(jobs) == 12
    for fc in jobs.values():
        assert (fc.train.patience, fc.train.epochs) == (5, 7)
    assert SparseConfig().patience == 3 and SparseConfig().epochs == 30
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
