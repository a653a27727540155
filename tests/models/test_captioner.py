"""The image captioner (Xu et al. 2015): the doubly stochastic penalty against a hand
computation, attention that sums to one over the patches and gives masked patches 0 in every
softness, REINFORCE and straight-through gradients reaching the attention, the softness
round-tripping through a checkpoint, and train -> evaluate -> view from the CLI."""

import json
import math

import numpy as np
import pytest
import torch

import attnkit
from attnkit.cli import main
from attnkit.data import digit_captions as dc
from attnkit.data import digits
from attnkit.data.vocab import Vocab
from attnkit.models import build_model, parse_options
from attnkit.models.caption_softness import (
    ExpectationMix,
    doubly_stochastic_penalty,
    tau_at,
    uniform,
)
from attnkit.models.captioner import CaptionerConfig
from attnkit.tasks.caption import attention_in_cell, cell_patches, digit_accuracy
from attnkit.train import checkpoint
from attnkit.train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from attnkit.viz.caption_view import upsample

SOFTNESS = ("soft", "mean", "hard", "gumbel", "variational")


def test_doubly_stochastic_penalty_against_a_hand_computation():
    # one caption of 3 steps (the last is padding) over 3 patches (the last masked)
    w = torch.tensor([[[0.5, 0.5, 0.0], [0.9, 0.1, 0.0], [0.2, 0.2, 0.6]]])  # (1, 3, 3)
    steps = torch.tensor([[True, True, False]])
    patches = torch.tensor([[True, True, False]])
    # Σ_t α_t1 = 1.4, Σ_t α_t2 = 0.6: (1 − 1.4)² + (1 − 0.6)² = 0.16 + 0.16
    got = doubly_stochastic_penalty(w, steps, patches)
    assert got.shape == (1,) and math.isclose(float(got), 0.32, rel_tol=1e-6)
    every = doubly_stochastic_penalty(
        w, torch.ones(1, 3, dtype=torch.bool), torch.ones(1, 3, dtype=torch.bool)
    )
    assert math.isclose(
        float(every), (1 - 1.6) ** 2 + (1 - 0.8) ** 2 + (1 - 0.6) ** 2, rel_tol=1e-6
    )


def _examples():
    labels = digits.digit_images()[1]
    big = digits.Canvas(
        3, 3, tuple(digits.Placement(i, int(labels[i]), i % 3, i // 3) for i in range(4))
    )
    small = digits.Canvas(2, 2, (digits.Placement(7, int(labels[7]), 1, 1),))
    return [dc.CaptionExample(c, dc.caption_words(c)) for c in (big, small)]


def _model(softness, **kw):
    torch.manual_seed(0)
    return build_model(
        "captioner", src_vocab=4, tgt_vocab=14, preset="tiny", softness=softness, **kw
    )


@pytest.mark.parametrize("softness", SOFTNESS)
@pytest.mark.parametrize("training", [False, True])
def test_attention_sums_to_one_over_the_patches_and_a_masked_patch_gets_zero(softness, training):
    examples = _examples()
    vocab = Vocab.build([w for e in examples for w in [e.words]])
    (b,) = dc.batches(examples, vocab, vocab, 2)
    model = _model(softness, patch=4).train(training)
    out = model(b.image, b.pixels, b.tgt_in)
    w = out.weights.detach()  # (B, T, L) over a 6x6 grid
    assert w.shape == (2, b.tgt_in.shape[1], 36)
    allowed = b.pixels[:, ::4, ::4].flatten(1)  # (B, L): the 2x2-cell canvas has 4x4 patches
    assert int(allowed[1].sum()) == 16 and bool(allowed[0].all())
    torch.testing.assert_close(w.sum(-1), torch.ones(2, w.shape[1]))
    assert bool((w[1][:, ~allowed[1]] == 0).all())
    if softness == "mean":
        torch.testing.assert_close(w[1][:, allowed[1]], torch.full((w.shape[1], 16), 1 / 16))


def test_hard_attention_trains_the_score_through_reinforce_and_gumbel_straight_through():
    examples = _examples()
    vocab = Vocab.build([e.words for e in examples])
    (b,) = dc.batches(examples, vocab, vocab, 2)
    for softness in ("hard", "gumbel"):
        model = _model(softness, entropy_weight=0.0, hard_mix=0.0).train()  # pure REINFORCE
        loss, out = model.training_loss(b)
        loss.backward()
        assert model.score.v.grad is not None and float(model.score.v.grad.abs().sum()) > 0
        if softness == "hard":  # the context was one sampled patch: weights are α, not one-hot
            assert out.log_prob is not None and out.log_prob.shape == b.tgt_in.shape
            assert float(model.baseline) == pytest.approx(
                float(
                    -(  # first baseline: mean R
                        torch.nn.functional.cross_entropy(
                            out.logits.detach().transpose(1, 2), b.tgt_out, reduction="none"
                        )
                        * (b.tgt_out != 0)
                    )
                    .sum(1)
                    .mean()
                ),
                rel=1e-5,
            )
        assert int(model.updates) == 1
    # without the sample path (eval) no REINFORCE term: the score gets its gradient via α only
    # in soft attention; hard at test with argmax gives a context with no gradient to α
    model = _model("hard").eval()
    out = model(b.image, b.pixels, b.tgt_in)
    assert out.log_prob is None


def test_expectation_mix_gives_chosen_images_the_soft_context_and_the_others_a_sample():
    torch.manual_seed(1)
    w = torch.softmax(torch.randn(4, 1, 5), -1)  # (B, 1, L)
    v = torch.randn(4, 5, 3)  # (B, L, D)
    expected = torch.tensor([True, False, True, False])
    r = ExpectationMix(expected)(w, v)
    torch.testing.assert_close(r.context[expected], (w @ v)[expected])
    for b in (1, 3):  # a sampled image's context is one of its patches, the one logged
        z = int(r.extras["index"][b, 0])
        torch.testing.assert_close(r.context[b, 0], v[b, z])
        torch.testing.assert_close(r.extras["log_prob"][b, 0], w[b, 0, z].log())


def test_variational_elbo_bounds_the_exact_marginal_and_trains_the_attention():
    examples = _examples()
    vocab = Vocab.build([e.words for e in examples])
    (b,) = dc.batches(examples, vocab, vocab, 2)
    model = _model("variational").train()
    loss, out = model.training_loss(b)
    loss.backward()
    assert model.score.v.grad is not None and float(model.score.v.grad.abs().sum()) > 0
    assert model.inference is not None and model.inference.bilinear.weight.grad is not None
    real = b.tgt_out != 0
    marginal = torch.log_softmax(out.logits, -1).gather(-1, b.tgt_out[..., None])[..., 0]
    # the logits are already log p(y_t) = log Σ_z α_tz p(y_t | a_z): normalised over words
    torch.testing.assert_close(out.logits.exp().sum(-1), torch.ones(real.shape))
    elbo = model._elbo(out, b.tgt_out).detach()
    assert bool((elbo[real] <= marginal.detach()[real] + 1e-5).all())
    assert float(loss.detach()) == pytest.approx(float(-(elbo * real).sum() / real.sum()), rel=1e-5)


def test_hard_at_test_is_argmax_or_the_expectation_as_configured():
    examples = _examples()
    vocab = Vocab.build([e.words for e in examples])
    (b,) = dc.batches(examples, vocab, vocab, 2)
    soft = _model("soft").eval()
    expect = _model("hard", at_test="expectation").eval()
    expect.load_state_dict(soft.state_dict())
    torch.testing.assert_close(
        expect(b.image, b.pixels, b.tgt_in).logits, soft(b.image, b.pixels, b.tgt_in).logits
    )
    argmax = _model("hard", at_test="argmax").eval()
    argmax.load_state_dict(soft.state_dict())
    a = argmax(b.image, b.pixels, b.tgt_in).logits
    assert torch.equal(a, argmax(b.image, b.pixels, b.tgt_in).logits)  # deterministic
    assert not torch.allclose(a, soft(b.image, b.pixels, b.tgt_in).logits)


def test_tau_schedule_and_the_uniform_normaliser():
    cfg = CaptionerConfig(4, 10, tau_start=1.0, tau_end=0.25, tau_steps=100)
    assert tau_at(cfg, 0) == 1.0
    assert tau_at(cfg, 50) == pytest.approx(0.5)
    assert tau_at(cfg, 10_000) == pytest.approx(0.25)
    mask = torch.tensor([[[True, False, True, True]]])
    torch.testing.assert_close(
        uniform(torch.randn(1, 1, 4), mask), torch.tensor([[[1 / 3, 0, 1 / 3, 1 / 3]]])
    )


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        (
            "softness",
            "fuzzy",
            "softness='fuzzy'; choose one of soft, mean, hard, gumbel, variational",
        ),
        ("at_test", "sample", "at_test"),
        ("tau_end", 0.0, "temperature must be > 0"),
        ("doubly_stochastic", -1.0, "doubly_stochastic=-1.0"),
        ("baseline_decay", 1.0, r"in \[0, 1\)"),
        ("hard_mix", 1.5, "hard_mix=1.5; it is a probability"),
        ("patch", 3, "choose 1, 2, 4 or 8"),
        ("dec_hidden", 0, "dec_hidden=0"),
    ],
)
def test_bad_config_values_are_clear_errors(field, value, match):
    with pytest.raises(ValueError, match=match):
        CaptionerConfig(src_vocab=4, tgt_vocab=10, **{field: value})


def test_opt_parses_the_softness_fields():
    opts = parse_options("captioner", ["softness=gumbel", "tau_start=2", "gate=false"])
    assert opts == {"softness": "gumbel", "tau_start": 2.0, "gate": False}


def test_digit_accuracy_and_upsample_by_hand():
    assert (
        digit_accuracy(
            [["one", "two"], ["three", "left-of", "four"]],
            [["one", "nine", "five"], ["three", "above", "four"]],
        )
        == 3 / 5
    )
    w = np.zeros(6, dtype=np.float32)
    w[4] = 1.0  # row 1, col 1 of a 2x3 grid
    m = upsample(w, (2, 3), 4)
    assert m.shape == (8, 12) and m.sum() == pytest.approx(1.0)
    assert np.unravel_index(m.argmax(), m.shape)[0] in range(4, 8)
    assert m[4:8, 4:8].sum() > 0.5 * m.sum()  # most of the mass on the attended patch


def test_attention_in_cell_by_hand():
    assert cell_patches(1, 2, (6, 6), 4) == [16, 17, 22, 23]  # rows 2-3, cols 4-5 of 6x6
    assert cell_patches(0, 1, (3, 3), 8) == [1]
    labels = digits.digit_images()[1]
    first = {d: int(np.flatnonzero(labels == d)[0]) for d in range(10)}
    canvas = digits.Canvas(3, 3, (digits.Placement(first[4], 4, 0, 0),
                                  digits.Placement(first[2], 2, 1, 2)))  # fmt: skip
    ex = dc.CaptionExample(canvas, dc.caption_words(canvas, positions=True))  # four above two
    maps = np.zeros((3, 9), dtype=np.float32)
    maps[0, 0], maps[0, 1] = 0.75, 0.25  # "four": 0.75 on its cell (0, 0)
    maps[2, 5] = 0.5  # "two" is word 2 (after "above"); its cell (1, 2) is patch 5
    got = attention_in_cell([["four", "above", "two"]], [ex], [maps], (3, 3), 8)
    assert got == pytest.approx((0.75 + 0.5) / 2)
    wrong = attention_in_cell([["four", "above", "six"]], [ex], [maps], (3, 3), 8)
    assert wrong == pytest.approx(0.75)  # a misnamed digit does not count
    assert attention_in_cell([["one"]], [ex], [maps], (3, 3), 8) is None


def _fit(out, softness, epochs=1):
    return attnkit.fit(
        FitConfig(
            data=DataConfig(task="digit-captions", train_size=48, valid_size=8, test_size=8),
            model=ModelConfig("captioner", preset="tiny", options={"softness": softness}),
            train=TrainConfig(epochs=epochs, batch_size=16, lr=3e-3, progress=False),
            out=out,
        ),
        log=lambda s: None,
    )


def test_training_lowers_the_loss_and_the_valid_loss_is_the_token_mean_nll(tmp_path):
    """The caption family's loss trains the captioner, and the recorded valid loss is the
    token-mean cross-entropy of the saved model on the valid captions, recomputed here."""
    import torch.nn.functional as F

    from attnkit.data.tasks import load_task
    from attnkit.tasks.caption import CAPTION

    result = _fit(tmp_path / "run", "soft", epochs=3)
    losses = [row["valid_loss"] for row in result.history]
    assert losses[-1] < losses[0]
    loaded = checkpoint.load(result.last)
    model = loaded.model.eval()
    valid = load_task("digit-captions", seed=0, train_size=48, valid_size=8, test_size=8).valid
    (b,) = CAPTION.batches(valid, loaded.src_vocab, loaded.tgt_vocab, 64, None)
    with torch.no_grad():
        logits = model(b.image, b.pixels, b.tgt_in).logits  # (B, T, V)
    real = b.tgt_out != 0
    nll = F.cross_entropy(logits[real], b.tgt_out[real])  # mean over the real tokens
    assert losses[-1] == pytest.approx(float(nll), abs=1e-4)


@pytest.mark.parametrize("softness", ["gumbel", "variational"])
def test_softness_round_trips_through_a_checkpoint(tmp_path, softness):
    result = _fit(tmp_path / "run", softness)
    loaded = checkpoint.load(result.last)
    assert loaded.model.config.softness == softness
    assert int(loaded.model.updates) == 3  # 48 examples / 16: the τ schedule's count came back
    assert loaded.model.tau() < loaded.model.config.tau_start
    assert (loaded.model.inference is not None) == (softness == "variational")


def test_train_evaluate_and_view_from_the_cli(tmp_path, capsys):
    run = tmp_path / "run"
    rc = main(
        [
            "train",
            "--task",
            "digit-captions",
            "--model",
            "captioner",
            "--preset",
            "tiny",
            "--opt",
            "softness=hard",
            "--train-size",
            "32",
            "--valid-size",
            "8",
            "--test-size",
            "8",
            "--epochs",
            "1",
            "--batch-size",
            "16",
            "--no-progress",
            "--out",
            str(run),
        ]
    )
    assert rc == 0
    assert checkpoint.load(run).model.config.softness == "hard"
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 8 and {"exact_match", "digit_accuracy", "bleu", "chrf"} <= set(report)
    assert 0 <= report.get("attention_in_cell", 0) <= 1
    assert 0 <= report["digit_accuracy"] <= 1
    page, png = tmp_path / "v.html", tmp_path / "v.png"
    assert (
        main(
            [
                "view",
                "--checkpoint",
                str(run),
                "--example",
                "1",
                "--out",
                str(page),
                "--png",
                str(png),
            ]
        )
        == 0
    )
    said = capsys.readouterr().out
    assert "example 1:" in said and "generated:" in said and "argmax at test" in said
    assert png.stat().st_size > 1000
    text = page.read_text()
    assert "data:image/png;base64," in text and "Content-Security-Policy" in text
    assert "http://" not in text and "https://" not in text
