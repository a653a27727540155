"""Xu et al. 2015's recipe for the captioner's hard attention, piece by piece (issue 29): the
reward (per-token mean × 0.1, Xu's arctic-captions capgen.py) and the whole hard loss against
a hand computation of Xu's cost, the moving-average baseline fed the sampled captions only,
the expected-context switch per minibatch, a frozen pretrained CNN that gets no gradient,
and the β gate off for hard attention (gate=False: β ≡ 1)."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnkit.data import digit_captions as dc
from attnkit.data import digits
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.models.caption_features import EMPTY, cell_labels, cnn, pretrain_cnn
from attnkit.models.caption_softness import caption_reward, expected_context

XU = dict(reward="mean", reward_scale=0.1, mix_per="batch", baseline_on="sampled",
          entropy_weight=0.002, gate=False)  # fmt: skip


def _batch(n: int = 4):
    labels = digits.digit_images()[1]
    canvases = [digits.Canvas(3, 3, tuple(digits.Placement(10 * k + i, int(labels[10 * k + i]),
                                                           i, (i + k) % 3)
                                          for i in range(1 + k % 3)))
                for k in range(n)]  # fmt: skip
    examples = [dc.CaptionExample(c, dc.caption_words(c)) for c in canvases]
    vocab = Vocab.build([e.words for e in examples])
    (b,) = dc.batches(examples, vocab, vocab, n)
    return b, len(vocab)


def _model(v: int, **kw):
    torch.manual_seed(0)
    return build_model("captioner", src_vocab=4, tgt_vocab=v, preset="tiny", softness="hard",
                       **kw).double()  # fmt: skip


def test_reward_is_the_per_token_mean_log_likelihood_times_a_tenth_by_hand():
    nll = torch.tensor([[0.5, 1.0, 2.0, 9.0], [0.25, 0.75, 7.0, 7.0]])  # 9, 7: padding
    real = torch.tensor([[True, True, True, False], [True, True, False, False]])
    mean = caption_reward(nll, real, "mean", 0.1)
    assert mean.tolist() == pytest.approx([-0.1 * 3.5 / 3, -0.1 * 1.0 / 2])
    assert caption_reward(nll, real, "sum", 1.0).tolist() == pytest.approx([-3.5, -1.0])
    with pytest.raises(ValueError, match="reward='max'"):
        caption_reward(nll, real, "max", 1.0)


def test_hard_loss_is_xus_cost_per_token_by_hand():
    """Xu's cost (capgen.py): the caption NLL summed over steps, averaged over the minibatch,
    plus per caption (not averaged: known_grads) −0.1 (R̄ − b) Σ_t log α_t(s̃_t) − λ Σ_t H(α_t),
    R̄ the per-token mean log-likelihood; ours is that cost divided by the mean caption length
    (per token), b the first minibatch's mean R (a new moving average)."""
    b, v = _batch()
    model = _model(v, **{**XU, "hard_mix": 0.0}).train()  # every caption sampled
    b = dc.CaptionBatch(b.image.double(), b.pixels, b.tgt_in, b.tgt_out, b.index)
    loss, out = model.training_loss(b)
    assert out.log_prob is not None and out.entropy is not None
    real = (b.tgt_out != 0).double()  # (B, T)
    nll = F.cross_entropy(out.logits.detach().transpose(1, 2), b.tgt_out, reduction="none")
    n, bsz = float(real.sum()), real.shape[0]
    rbar = [-float((nll[i] * real[i]).sum()) / float(real[i].sum()) for i in range(bsz)]
    base = sum(0.1 * r for r in rbar) / bsz
    xu = float((nll * real).sum()) / bsz
    for i in range(bsz):
        logp = float((out.log_prob[i].detach() * real[i]).sum())
        ent = float((out.entropy[i].detach() * real[i]).sum())
        xu += -(0.1 * rbar[i] - base) * logp - 0.002 * ent
    # rel 1e-6: the moving average is kept in float32 (MovingAverageBaseline)
    assert float(loss.detach()) == pytest.approx(xu / (n / bsz), rel=1e-6)
    assert float(model.baseline) == pytest.approx(base, rel=1e-6)


def test_baseline_is_fed_the_sampled_captions_only():
    b, v = _batch(6)
    b = dc.CaptionBatch(b.image.double(), b.pixels, b.tgt_in, b.tgt_out, b.index)
    model = _model(v, **{**XU, "hard_mix": 1.0}).train()  # the minibatch reads α: no sample
    model.training_loss(b)
    assert math.isnan(float(model.baseline))  # unset: no sampled caption fed it
    model = _model(v, **{**XU, "hard_mix": 1.0, "baseline_on": "all"}).train()
    model.training_loss(b)
    assert not math.isnan(float(model.baseline))  # the old way: expected captions feed it
    # per image: the baseline is the mean reward of the captions that drew a sample
    model = _model(v, **{**XU, "hard_mix": 0.5, "mix_per": "image"}).train()
    seed = next(s for s in range(100) if 0 < int((torch.manual_seed(s) and torch.rand(6) < 0.5)
                                                 .sum()) < 6)  # a mixed minibatch  # fmt: skip
    torch.manual_seed(seed)
    expected = torch.rand(6) < 0.5  # the draw training_loss makes first
    torch.manual_seed(seed)
    _, out = model.training_loss(b)
    nll = F.cross_entropy(out.logits.detach().transpose(1, 2), b.tgt_out, reduction="none")
    r = caption_reward(nll, b.tgt_out != 0, "mean", 0.1)
    assert float(model.baseline) == pytest.approx(float(r[~expected].mean()), rel=1e-6)
    assert float(model.baseline) != pytest.approx(float(r.mean()), rel=1e-6)


def test_expected_context_is_switched_per_minibatch():
    torch.manual_seed(0)
    draws = torch.stack([expected_context(8, 0.5, "batch") for _ in range(400)])  # (400, 8)
    assert bool((draws == draws[:, :1]).all())  # one switch for the whole minibatch
    assert 0.4 < float(draws[:, 0].double().mean()) < 0.6
    per_image = torch.stack([expected_context(8, 0.5, "image") for _ in range(50)])
    assert not bool((per_image == per_image[:, :1]).all())
    assert not bool(expected_context(8, 0.0, "batch").any())
    assert bool(expected_context(8, 1.0, "batch").all())
    with pytest.raises(ValueError, match="mix_per='step'"):
        expected_context(8, 0.5, "step")
    # an expected minibatch reads the soft context: the logits of the test-time expectation
    b, v = _batch()
    b = dc.CaptionBatch(b.image.double(), b.pixels, b.tgt_in, b.tgt_out, b.index)
    model = _model(v, **{**XU, "hard_mix": 1.0, "at_test": "expectation"}).train()
    _, out = model.training_loss(b)
    model.eval()
    torch.testing.assert_close(out.logits, model(b.image, b.pixels, b.tgt_in).logits)


def test_a_frozen_pretrained_cnn_gets_no_gradient_and_keeps_its_weights(tmp_path):
    torch.manual_seed(5)
    state = {k: v + 0.01 for k, v in cnn(8, 4).state_dict().items()}
    path = tmp_path / "cnn.pt"
    torch.save(state, path)
    b, v = _batch()
    b = dc.CaptionBatch(b.image.double(), b.pixels, b.tgt_in, b.tgt_out, b.index)
    model = _model(v, **XU, features=str(path), freeze_cnn=True).train()
    for k, w in model.encoder.cnn.state_dict().items():
        torch.testing.assert_close(w, state[k].double())  # loaded from the file
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    loss, _ = model.training_loss(b)
    loss.backward()
    assert all(p.grad is None for p in model.encoder.cnn.parameters())
    assert model.encoder.proj.weight.grad is not None  # the rest trains
    assert float(model.score.v.grad.abs().sum()) > 0
    opt.step()
    for k, w in model.encoder.cnn.state_dict().items():
        torch.testing.assert_close(w, state[k].double())
    # a trainable CNN (the old default) does get a gradient
    model = _model(v, **XU).train()
    model.training_loss(b)[0].backward()
    assert all(p.grad is not None for p in model.encoder.cnn.parameters())
    with pytest.raises(ValueError, match="freeze_cnn=True with no features"):
        _model(v, freeze_cnn=True)
    with pytest.raises(FileNotFoundError, match="no such file"):
        _model(v, features=str(tmp_path / "absent.pt"))


def test_the_gate_off_leaves_the_context_unscaled_and_on_scales_it():
    b, v = _batch()
    b = dc.CaptionBatch(b.image.double(), b.pixels, b.tgt_in, b.tgt_out, b.index)
    for gate in (False, True):
        model = _model(v, **{**XU, "gate": gate, "hard_mix": 1.0}).train()
        model.training_loss(b)[0].backward()
        got = model.beta.weight.grad
        assert (got is not None and float(got.abs().sum()) > 0) == gate  # β = σ(f_β h) or 1


def test_cell_labels_by_hand_and_the_classifier_loads_into_the_captioner():
    labels = digits.digit_images()[1]
    c = digits.Canvas(2, 3, (digits.Placement(0, int(labels[0]), 0, 2),
                             digits.Placement(1, int(labels[1]), 1, 0)))  # fmt: skip
    got = cell_labels([c], 8)  # one patch per cell
    assert got.tolist() == [[EMPTY, EMPTY, int(labels[0]), int(labels[1]), EMPTY, EMPTY]]
    got4 = cell_labels([c], 4).view(4, 6)  # 2x2 patches per cell
    assert got4[:2, 4:].eq(int(labels[0])).all() and got4[2:, :2].eq(int(labels[1])).all()
    assert int((got4 == EMPTY).sum()) == 24 - 8
    with pytest.raises(ValueError, match="patch=3"):
        cell_labels([c], 3)
    state, report = pretrain_cnn([c] * 8, [c], channels=4, patch=8, seed=0, layers=3, epochs=2,
                                 batch_size=4)  # fmt: skip
    assert report["updates"] == 4 and 0 <= report["valid_accuracy"] <= 1
    assert 0 <= report["valid_canvas_accuracy"] <= report["valid_accuracy"]
    m = build_model("captioner", src_vocab=4, tgt_vocab=14, preset="tiny", channels=4, patch=8,
                    cnn_layers=3)  # fmt: skip
    m.encoder.cnn.load_state_dict(state)  # the same modules: the weights fit


def test_canvas_accuracy_counts_canvases_with_every_patch_right_by_hand():
    """Two 2x3 canvases; the classifier gets every patch of the first right and one empty
    patch of the second wrong: patch accuracy 11/12, canvas accuracy 1/2."""

    from attnkit.models.caption_features import canvas_accuracy, patch_accuracy

    labels = digits.digit_images()[1]
    c = digits.Canvas(2, 3, (digits.Placement(0, int(labels[0]), 0, 2),
                             digits.Placement(1, int(labels[1]), 1, 0)))  # fmt: skip
    gold = cell_labels([c, c], 8)  # (2, 6)
    pred = gold.clone()
    pred[1, 4] = (int(gold[1, 4]) + 1) % (EMPTY + 1)  # one patch of canvas 1 wrong
    logits = torch.nn.functional.one_hot(pred, EMPTY + 1).float()  # (2, 6, 11)

    def net(images):  # noqa: ANN001, ANN202
        return torch.zeros(images.shape[0], 1, 2, 3)  # (B, C, r, c): ignored by the head

    def head(x):  # noqa: ANN001, ANN202
        return logits

    assert patch_accuracy(net, head, [c, c], 8) == pytest.approx(11 / 12)  # type: ignore[arg-type]
    assert canvas_accuracy(net, head, [c, c], 8) == 0.5  # type: ignore[arg-type]
