"""The teacher-forced pass of RNNsearch and Luong runs the recurrence first and the output
layer once over all positions (models/latent.py ``unroll``): its logits, losses and scores
equal the per-step path (``step``, which decoding uses) in float64 on random weights, for
every softness, in training mode (same seed: samples drawn in the same order) and at test."""

import math

import pytest
import torch
import torch.nn.functional as F
from _seq2seq import padded_batch

from attnkit.models import build_model
from attnkit.models.base import Seq2Seq
from attnkit.models.latent import broadcast_feature, token_scores

SOFTNESS = ["soft", "mean", "hard", "gumbel", "variational"]


def model(name: str, softness: str, estimator: str = "enumerate", dropout: float = 0.0):
    torch.manual_seed(0)
    m = build_model(
        name, preset="tiny", src_vocab=15, tgt_vocab=13, softness=softness, estimator=estimator,
        dropout=dropout,
    )  # fmt: skip
    for p in m.parameters():  # random weights of a visible scale (biases too)
        torch.nn.init.normal_(p, std=0.5)
    return m.double()


def per_step(m, b, seed: int):
    torch.manual_seed(seed)
    return Seq2Seq.forward(m, *b[:3])  # the loop of ``step`` over the positions


def test_broadcast_feature_spreads_over_the_extra_context_dims() -> None:
    f = torch.randn(2, 3, 4)  # (B, T, F)
    out = broadcast_feature(f, torch.zeros(2, 3, 7, 5))  # contexts (B, T, K, Dv)
    assert out.shape == (2, 3, 7, 4)
    assert torch.equal(out[:, :, 6], f)
    assert torch.equal(broadcast_feature(f, torch.zeros(2, 3, 5)), f)  # (B, T, Dv): as it is
    assert broadcast_feature(f[:, 0], torch.zeros(2, 7, 5)).shape == (2, 7, 4)  # one step


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("softness", SOFTNESS)
@pytest.mark.parametrize("training", [False, True])
def test_forward_equals_the_per_step_path(name: str, softness: str, training: bool) -> None:
    # RNNsearch's dropout acts inside the recurrence, so its draws keep their order; Luong's
    # acts in the output layer, whose masks are now drawn after the loop (same distribution)
    dropout = 0.3 if name == "rnnsearch" else 0.0
    m, b = model(name, softness, dropout=dropout), padded_batch()
    m.train(training)
    torch.manual_seed(7)
    fast = m(*b[:3])
    slow = per_step(m, b, 7)
    torch.testing.assert_close(fast.logits, slow.logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(fast.weights, slow.weights, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("softness", ["soft", "mean", "hard", "gumbel"])
def test_training_loss_is_the_per_step_cross_entropy(name: str, softness: str) -> None:
    """soft, mean, gumbel: the loss is cross-entropy of the per-step logits; hard in training
    samples z ~ α in the per-step order, so its logits are the per-step ones too. soft and
    mean run packed targets on the CPU: the per-step logits at the real positions."""
    m, b = model(name, softness), padded_batch()
    m.train()
    torch.manual_seed(3)
    loss, out = m.training_loss(*b, 0.1)
    if softness in ("hard", "gumbel"):
        m.updates.zero_()  # the per-step pass below anneals τ from the same count
    slow = per_step(m, b, 3)
    if softness in ("soft", "mean"):  # packed targets (models/packed.py): 0 after the end
        real = b[3] != 0  # (B, T): padding only after each target's end here
        assert torch.equal(out.logits[~real], torch.zeros_like(out.logits[~real]))
        torch.testing.assert_close(out.logits[real], slow.logits[real], rtol=0, atol=1e-6)
    else:
        torch.testing.assert_close(out.logits, slow.logits, rtol=0, atol=1e-6)
    ce = F.cross_entropy(
        slow.logits.flatten(0, 1), b[3].flatten(), ignore_index=0, label_smoothing=0.1
    )
    if softness != "hard":
        torch.testing.assert_close(loss, ce, rtol=0, atol=1e-6)
    else:
        assert float(loss.detach()) != pytest.approx(float(ce.detach()))  # + REINFORCE


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
def test_variational_loss_is_the_per_step_negative_elbo(name: str) -> None:
    """−ELBO per real token, by hand from one decoder step at a time:
    Σ_s q_s (log p(y | h_s) − log q_s + log p_s) (Deng 2018, eq. 3)."""
    m, (src, src_len, tgt_in, tgt_out) = model(name, "variational"), padded_batch()
    m.eval()
    loss, _ = m.training_loss(src, src_len, tgt_in, tgt_out)
    with torch.no_grad():  # the reference needs no graph
        memory = m.encode(src, src_len)
        q_log = m.inference(tgt_out, memory["keys"], memory["mask"][:, 0])  # (B, T, S)
        state, total, count = m.init_state(memory), 0.0, 0
        for t in range(tgt_in.shape[1]):
            parts = m.parts(tgt_in[:, t], state, memory)
            state = parts.state
            log_lik = torch.log_softmax(parts.readout(parts.values), -1)  # (B, S, V)
            for i in range(src.shape[0]):
                y, n = int(tgt_out[i, t]), int(src_len[i])
                if y == 0:
                    continue
                p = parts.alpha[i, :n] / parts.alpha[i, :n].sum()
                q = q_log[i, t, :n].exp()
                terms = q * (log_lik[i, :n, y] - q.log() + p.log())
                total, count = total + float(terms.sum()), count + 1
    assert math.isclose(float(loss.detach()), -total / count, abs_tol=1e-5)  # float32 log-lik


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("softness", ["soft", "variational"])
def test_token_scores_are_the_per_step_log_likelihoods(name: str, softness: str) -> None:
    m, b = model(name, softness), padded_batch()
    m.eval()
    ll, _ = token_scores(m, *b)
    slow = torch.log_softmax(per_step(m, b, 0).logits.float(), -1)  # (B, T, V)
    gold = slow.gather(-1, b[3][..., None])[..., 0]  # (B, T)
    torch.testing.assert_close(ll, gold, rtol=0, atol=1e-5, check_dtype=False)
