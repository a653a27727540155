"""``attnkit experiment softness``: the verdict on synthetic numbers, each measurement against
an independent computation, equal budgets for every row, and clear config errors."""

import math
from pathlib import Path

import pytest
import torch

from attnkit.experiments.softness import (
    ROWS,
    SoftnessConfig,
    model_options,
    summarise,
    train_config,
    verdict,
)
from attnkit.experiments.softness_measure import (
    exact_scores,
    gradient_variance,
    reduction_cost,
    reduction_flops,
    relative_variance,
    score_flops,
)


def summary(quality, entropy, ppl) -> dict:
    """One task's summary from per-row (quality, entropy, ppl) means."""
    return {"toy-ko": {r: {"quality": quality[r], "entropy": entropy[r], "ppl": ppl[r]}
                       for r in quality}}  # fmt: skip


GOOD = dict(
    quality={"mean": 20.0, "soft": 90.0, "hard": 80.0, "gumbel": 85.0, "variational": 91.0,
             "variational-sample": 89.0},
    entropy={"mean": 2.0, "soft": 0.9, "hard": 0.2, "gumbel": 0.5, "variational": 0.5,
             "variational-sample": 0.6},
    ppl={"mean": 5.0, "soft": 1.5, "hard": 1.9, "gumbel": 1.7, "variational": 1.4,
         "variational-sample": 1.45},
)  # fmt: skip


def test_verdict_reproduced() -> None:
    reasons, checks = verdict(summary(**GOOD))
    assert reasons == [] and checks["reasons"] == []
    assert checks["toy-ko"]["ppl"]["variational"] == 1.4


def test_verdict_fails_on_each_claim() -> None:
    bad = {k: dict(v) for k, v in GOOD.items()}
    bad["quality"]["hard"] = 20.0  # not above mean pooling (ties fail)
    bad["entropy"]["variational-sample"] = 1.0  # above soft's 0.9
    bad["ppl"]["soft"] = 2.0  # above hard's 1.9
    reasons, _ = verdict(summary(**bad))
    text = " | ".join(reasons)
    assert "not above mean pooling's 20.0: hard 20.0" in text
    assert "entropy not hard < variational-sample < soft: 0.200, 1.000, 0.900" in text
    assert "perplexity not variational <= soft <= hard: 1.400, 2.000, 1.900" in text
    assert len(reasons) == 4  # both variational rows fail the perplexity order


def test_verdict_needs_the_rows_it_compares() -> None:
    only = {k: {r: v[r] for r in ("soft", "gumbel")} for k, v in GOOD.items()}
    reasons, _ = verdict(summary(**only))
    assert any("mean pooling" in r for r in reasons)
    assert any("hard, soft and a variational row" in r for r in reasons)


def test_summarise_means_and_stds_by_hand() -> None:
    recs = [
        {"task": "toy-ko", "row": "soft", "seed": s, "quality": q, "exact": 0.0, "ppl": p,
         "ppl_bound": None, "entropy": 1.0, "aer": 0.5, "step_seconds": 0.01,
         "decode_seconds": 0.001, "grad_variance": math.nan, "parameters": 7, "updates": 400}
        for s, (q, p) in enumerate([(80.0, 1.0), (90.0, 2.0), (100.0, 3.0)])
    ]  # fmt: skip
    s = summarise(recs)["toy-ko"]["soft"]
    assert s["quality"] == pytest.approx(90.0) and s["quality_std"] == pytest.approx(10.0)
    assert s["ppl"] == pytest.approx(2.0) and s["ppl_std"] == pytest.approx(1.0)
    assert s["ppl_bound"] is None and s["grad_variance"] is None  # nothing to average
    assert s["seeds"] == 3 and s["updates"] == [400] and s["parameters"] == 7


def test_relative_variance_by_hand() -> None:
    g = [torch.tensor([1.0, 0.0]), torch.tensor([3.0, 0.0])]
    # mean (2, 0), sample variance (2, 0): 2 / 4
    assert relative_variance(g) == pytest.approx(0.5)
    assert relative_variance([torch.ones(3), torch.ones(3)]) == 0.0
    assert math.isnan(relative_variance([torch.zeros(3), torch.zeros(3)]))
    with pytest.raises(ValueError, match="at least 2"):
        relative_variance([torch.ones(2)])


def test_flop_formulas_by_hand() -> None:
    # B=2, S=3, m=A=4: W_a s = 2·2·4·4 = 64; sum + tanh + v over keys = 4·2·3·4 = 96
    assert score_flops(2, 3, 4, 4) == 160
    assert reduction_flops(2, 3, 5) == {"soft": 60, "hard": 0}
    c = reduction_cost(2, 3, 5, 4, reps=1)
    assert c["flops"] == {"scores": 160, "soft": 60, "hard": 0}
    assert c["values_read"] == {"soft": 6, "hard": 2}
    assert set(c["seconds"]) == {"scores", "soft_reduce", "hard_gather", "hard_one_hot"}


def tiny(softness: str):
    from attnkit.data.batching import batches
    from attnkit.data.tasks import load_task
    from attnkit.data.vocab import Vocab
    from attnkit.models import build_model

    data = load_task("toy-ko", seed=0, train_size=8, valid_size=2, test_size=6)
    sv = Vocab.build(e.src for e in data.train + data.test)
    tv = Vocab.build(e.tgt for e in data.train + data.test)
    torch.manual_seed(0)
    m = build_model("rnnsearch", preset="tiny", src_vocab=len(sv), tgt_vocab=len(tv),
                    softness=softness)  # fmt: skip
    return m, data.test, sv, tv, batches(data.test, sv, tv, 6)[0]


def test_exact_perplexity_of_soft_is_the_cross_entropy_of_the_loop() -> None:
    from attnkit.data.batching import batches
    from attnkit.train.loop import valid_loss

    m, test, sv, tv, _ = tiny("soft")
    got = exact_scores(m, test, sv, tv)
    want = math.exp(valid_loss(m, batches(test, sv, tv, 4)))  # token-mean CE, another path
    assert got["ppl"] == pytest.approx(want, rel=1e-5) and got["ppl_bound"] is None


def test_gradient_variance_is_zero_when_deterministic_and_restores_buffers() -> None:
    m, _, _, _, b = tiny("soft")
    assert gradient_variance(m, b, draws=3) == pytest.approx(0.0, abs=1e-20)
    m, _, _, _, b = tiny("hard")
    assert gradient_variance(m, b, draws=4) > 0 and int(m.updates) == 0
    m, _, _, _, b = tiny("mean")
    assert math.isnan(gradient_variance(m, b, draws=2))  # the score takes no part


def test_every_row_has_the_same_widths_data_and_updates(tmp_path: Path) -> None:
    cfg = SoftnessConfig()
    opts = {r: model_options(cfg, r) for r in ROWS}
    widths = {k: v for k, v in opts["soft"].items() if k not in ("softness", "estimator")}
    for o in opts.values():
        assert {k: v for k, v in o.items() if k not in ("softness", "estimator")} == widths
        assert o["tau_steps"] == cfg.updates == 400
    fits = [train_config(cfg, "toy-ko", r, 0, tmp_path / r) for r in ROWS]
    assert len({repr((f.data, f.train)) for f in fits}) == 1


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(tasks="toy-ko,mnist"), "--tasks"),
        (dict(rows="soft,soft"), "--rows"),
        (dict(rows="soft,sharp"), "--rows"),
        (dict(model="transformer"), "--model"),
        (dict(draws=1), "--draws"),
        (dict(seeds=0), "--seeds"),
        (dict(tau_end=0.0), "--tau-end"),
        (dict(baseline="learned"), "--baseline"),
    ],
)
def test_bad_config_fails_clearly(bad, match) -> None:
    with pytest.raises(ValueError, match=match):
        SoftnessConfig(**bad)
