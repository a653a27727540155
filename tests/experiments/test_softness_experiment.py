"""``attnkit experiment softness``: the verdict on synthetic numbers, each measurement against
an independent computation, equal budgets for every row, and clear config errors."""

import math
from pathlib import Path

import pytest
import torch
from _spies import packed_calls

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
        (dict(caption_epochs=0), "--caption-epochs"),
        (dict(caption_train_size=0), "--caption-train-size"),
    ],
)
def test_bad_config_fails_clearly(bad, match) -> None:
    with pytest.raises(ValueError, match=match):
        SoftnessConfig(**bad)


# -- digit-captions ----------------------------------------------------------------------------


def test_verdict_is_per_task() -> None:
    caption_rows = ("mean", "soft", "hard", "gumbel", "variational")  # no variational-sample
    good = summary(**GOOD)["toy-ko"]
    bad = {r: dict(good[r]) for r in caption_rows}
    bad["variational"]["ppl"] = 1.6  # above soft's 1.5
    reasons, checks = verdict({"toy-ko": good, "digit-captions": bad})
    assert reasons == ["digit-captions: perplexity not variational <= soft <= hard: 1.600, "
                       "1.500, 1.900"]  # fmt: skip
    assert set(checks["digit-captions"]["ppl"]) == set(caption_rows)
    reasons, _ = verdict({"toy-ko": good, "digit-captions": {r: good[r] for r in caption_rows}})
    assert reasons == []


def tiny_captioner(softness: str, updates: int = 3):
    """A tiny captioner trained ``updates`` Adam steps on 8 canvases, and a test batch of 3."""
    from attnkit.data import digit_captions as dc
    from attnkit.data.tasks import load_task
    from attnkit.data.vocab import Vocab
    from attnkit.models import build_model

    data = load_task("digit-captions", seed=0, train_size=8, valid_size=2, test_size=3)
    tv = Vocab.build([e.words for e in data.train + data.test])
    train = dc.batches(list(data.train), Vocab.build([]), tv, 8, None)[0]
    torch.manual_seed(0)
    m = build_model("captioner", preset="tiny", src_vocab=4, tgt_vocab=len(tv), softness=softness)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    m.train()
    for _ in range(updates):
        opt.zero_grad()
        m.training_loss(train)[0].backward()
        opt.step()
    m.eval()
    return m, list(data.test), tv, dc.batches(list(data.test), Vocab.build([]), tv, 3, None)[0]


def test_caption_perplexity_of_soft_is_the_family_eval_loss() -> None:
    from attnkit.experiments.softness_caption import caption_scores
    from attnkit.families.caption import caption_eval_loss

    m, test, tv, b = tiny_captioner("soft")
    with torch.no_grad():
        total, tokens = caption_eval_loss(m, b)  # summed cross-entropy, another path
    got = caption_scores(m, test, tv)
    assert got["ppl"] == pytest.approx(math.exp(total / tokens), rel=1e-5)
    assert got["ppl_bound"] is None and got["tokens"] == tokens


def test_caption_hard_marginal_against_a_loop_over_patches() -> None:
    """Σ_z α_z p(y_t | a_z, h) one patch at a time, the history along the argmax path."""
    from attnkit.experiments.softness_caption import caption_token_scores

    m, _, _, b = tiny_captioner("hard")
    ll, elbo = caption_token_scores(m, b)  # (B, T)
    assert elbo is None
    with torch.no_grad():
        for k in range(b.image.shape[0]):
            p = m.encoder(b.image[k : k + 1], b.pixels[k : k + 1])
            proj, state = m.score.project_keys(p.features), m.start(p)
            for t in range(int((b.tgt_out[k] != 0).sum())):
                prev, gold = b.tgt_in[k : k + 1, t], int(b.tgt_out[k, t])
                _, nxt, att = m.step(prev, state, p, proj)
                h, c = state
                beta = torch.sigmoid(m.beta(h))  # (1, 1)
                total = 0.0
                for z, a in enumerate(att.weights[0, 0].tolist()):
                    ctx = beta * p.features[:, z]  # (1, D)
                    y = m.tgt_emb(prev)
                    hz, _ = m.cell(torch.cat([y, ctx], -1), (h, c))
                    logits = m.out(y + m.out_h(hz) + m.out_z(ctx))  # (1, V)
                    total += a * float(torch.softmax(logits, -1)[0, gold])
                assert float(ll[k, t]) == pytest.approx(math.log(total), abs=1e-5)
                state = nxt


def test_caption_variational_bound_mean_entropy_and_scores(tmp_path: Path) -> None:
    from attnkit.experiments.softness_caption import caption_entropy, caption_scores

    m, test, tv, b = tiny_captioner("variational")
    got = caption_scores(m, test, tv)
    assert got["ppl_bound"] >= got["ppl"] > 1  # the ELBO bounds the exact likelihood
    m, test, tv, b = tiny_captioner("mean")
    ent, steps = caption_entropy(m, b)  # uniform over the 6x6 patches of a 3x3 canvas
    assert ent / steps == pytest.approx(math.log(36)) and steps == int((b.tgt_out != 0).sum())


def test_caption_rows_have_the_same_widths_data_and_updates(tmp_path: Path) -> None:
    from attnkit.experiments.softness import TASKS
    from attnkit.experiments.softness_caption import CAPTION_ROWS

    cfg = SoftnessConfig(tasks="toy-ko,digit-captions")
    assert TASKS["digit-captions"].rows == CAPTION_ROWS and cfg.caption_updates == 1008
    fits = [train_config(cfg, "digit-captions", r, 0, tmp_path / r) for r in CAPTION_ROWS]
    assert len({repr((f.data, f.train)) for f in fits}) == 1
    assert {f.model.name for f in fits} == {"captioner"}
    opts = [{k: v for k, v in f.model.options.items() if k != "softness"} for f in fits]
    assert all(o == opts[0] for o in opts) and opts[0]["tau_steps"] == 1008
    assert [f.model.options["softness"] for f in fits] == list(CAPTION_ROWS)


def test_quick_run_on_captions_scores_every_row(tmp_path: Path) -> None:
    from attnkit.experiments.softness import QUICK, run_experiment

    cfg = SoftnessConfig(**{**QUICK, "tasks": "digit-captions", "rows": "mean,soft,hard"})
    result = run_experiment(cfg, tmp_path, say=lambda *_: None)
    s = result["summary"]["digit-captions"]
    assert list(s) == ["mean", "soft", "hard"] and result["task_updates"]["digit-captions"] == 2
    assert s["mean"]["entropy"] == pytest.approx(math.log(36))
    assert all(0 <= s[r]["quality"] <= 100 and s[r]["ppl"] > 1 and s[r]["aer"] is None
               for r in s)  # fmt: skip
    assert s["mean"]["grad_variance"] is None  # NaN: the score takes no part; no mean
    assert s["soft"]["grad_variance"] == pytest.approx(0.0, abs=1e-20)
    assert s["hard"]["grad_variance"] > 0


def test_every_softness_is_timed_over_the_padded_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """step_seconds and the gradient draws run soft over the same padded loop as hard (no
    packed targets): the ms / update columns compare softness, not packing."""
    from attnkit.data.batching import batches
    from attnkit.data.toy_ko import generate
    from attnkit.data.vocab import Vocab
    from attnkit.experiments.softness_measure import step_seconds
    from attnkit.models import build_model

    calls = packed_calls(monkeypatch)
    data = generate(16, seed=0)
    sv, tv = Vocab.build(e.src for e in data), Vocab.build(e.tgt for e in data)
    b = batches(data, sv, tv, 8)[0]
    m = build_model("rnnsearch", src_vocab=len(sv), tgt_vocab=len(tv), preset="tiny")
    step_seconds(m, b, 1)
    gradient_variance(m, b, 2)
    assert calls == []
