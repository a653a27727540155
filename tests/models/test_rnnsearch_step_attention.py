"""RNNsearch's decoder attends through ``attnkit.mechanisms.stepwise.attend_step`` (one query per
sentence, the keys projected once, the source mask known to allow a key in every row): its
logits, attention weights, training loss and every parameter's gradient equal those of the
generic path, ``attend`` with the additive score computed from the raw annotations, in
float64 on random weights, for every softness, in training mode and at test. The gradients
of the teacher-forced pass (``unroll``) also equal those of the per-step path."""

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _seq2seq import padded_batch

import attnkit.models.latent as latent
import attnkit.models.rnnsearch as rnnsearch_mod
from attnkit.core import AttentionResult, attend
from attnkit.models import build_model
from attnkit.models.base import Seq2Seq

pytestmark = pytest.mark.usefixtures("one_thread")

CASES = [
    ("soft", "enumerate"),
    ("mean", "enumerate"),
    ("hard", "enumerate"),
    ("gumbel", "enumerate"),
    ("variational", "enumerate"),
    ("variational", "sample"),
]


def model(softness: str, estimator: str, dropout: float = 0.0):
    torch.manual_seed(0)
    m = build_model(
        "rnnsearch", preset="tiny", src_vocab=15, tgt_vocab=13, softness=softness,
        estimator=estimator, dropout=dropout,
    )  # fmt: skip
    for p in m.parameters():  # random weights of a visible scale (biases too)
        torch.nn.init.normal_(p, std=0.5)
    return m.double()


def generic(m: Any):
    """``attend_step`` replaced by ``attend`` on a (B, 1, m) query with the additive score's
    ``forward`` on the raw annotations (the values): no projected keys, no step score, the
    alignment stage, the normaliser's own masking and fix-up."""

    def step(query, keys, values, *, score, normaliser, mask, every_row, masked_out):  # noqa: ARG001
        att = attend(
            query[:, None], values, values, score=m.attention.score, align=m.attention.align,
            normaliser=normaliser, mask=mask[:, None],
        )  # fmt: skip
        assert att.weights is not None
        return AttentionResult(att.context[:, 0], att.weights[:, 0], att.scores)

    return step


def run(m: Any, b, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list]:
    """loss, logits, weights and the parameters' gradients of one training loss."""
    m.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    loss, out = m.training_loss(*b)
    loss.backward()
    grads = [p.grad.clone() if p.grad is not None else None for p in m.parameters()]
    return loss.detach(), out.logits.detach(), out.weights.detach(), grads


def assert_same(fast, slow) -> None:
    for a, b in zip(fast[:3], slow[:3], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    for ga, gb in zip(fast[3], slow[3], strict=True):
        assert (ga is None) == (gb is None)
        if ga is not None:
            torch.testing.assert_close(ga, gb, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("softness", "estimator"), CASES)
@pytest.mark.parametrize("training", [True, False])
def test_the_step_path_equals_the_generic_attention(
    softness: str, estimator: str, training: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    m, b = model(softness, estimator, dropout=0.3), padded_batch()
    m.train(training)
    counts = {"updates": None}
    if hasattr(m, "updates"):  # the stochastic softnesses count updates: start both at 0
        counts["updates"] = m.updates.clone()
    fast = run(m, b, seed=5)
    if counts["updates"] is not None:
        m.updates.copy_(counts["updates"])
        m.baseline.zero_()
    monkeypatch.setattr(rnnsearch_mod, "attend_step", generic(m))
    slow = run(m, b, seed=5)
    assert_same(fast, slow)


def test_the_generic_path_is_really_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above would prove nothing if the patch missed the model's call."""
    m, b = model("soft", "enumerate"), padded_batch()
    calls = []

    def spy(*args, **kwargs):
        calls.append(1)
        return generic(m)(*args, **kwargs)

    monkeypatch.setattr(rnnsearch_mod, "attend_step", spy)
    m(*b[:3])
    assert len(calls) == b[2].shape[1]  # one call per target position


def test_teacher_forced_gradients_equal_the_per_step_path() -> None:
    """``unroll`` (target embeddings looked up once and unbound) against the loop of
    ``step``: the cross-entropy's gradient for every parameter, float64."""
    m, b = model("soft", "enumerate"), padded_batch()
    m.train()

    def grads(forward) -> list:
        m.zero_grad(set_to_none=True)
        logits = forward(m, *b[:3]).logits  # (B, T, V)
        F.cross_entropy(logits.flatten(0, 1), b[3].flatten(), ignore_index=0).backward()
        return [p.grad.clone() for p in m.parameters() if p.grad is not None]

    fast, slow = grads(type(m).forward), grads(Seq2Seq.forward)
    assert len(fast) == len(slow) > 0
    for a, c in zip(fast, slow, strict=True):
        torch.testing.assert_close(a, c, rtol=1e-6, atol=1e-6)


def test_unroll_stacks_a_feature_unless_it_is_the_embeddings_themselves() -> None:
    """``latent._stacked``: the per-step embeddings read as they are give ``embedded`` back
    (no copy); equal values that are other tensors (dropout's output) are stacked."""
    embedded = torch.randn(2, 3, 4)  # (B, T, E)
    inputs = embedded.unbind(1)
    assert latent._stacked(inputs, inputs, embedded) is embedded
    copies = tuple(x.clone() for x in inputs)
    stacked = latent._stacked(copies, inputs, embedded)
    assert stacked is not embedded and torch.equal(stacked, embedded)
    mixed = (inputs[0], copies[1], inputs[2])
    assert latent._stacked(mixed, inputs, embedded) is not embedded


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_without_dropout_the_deep_output_reads_the_looked_up_embeddings(
    dropout: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With p = 0 the step skips dropout, so ``unroll`` hands the output layer the (B, T, E)
    embeddings as looked up (test_teacher_forced_gradients_equal_the_per_step_path checks
    the gradients of that path; tests/models/test_output_after_loop.py the dropout one)."""
    m, b = model("soft", "enumerate", dropout=dropout), padded_batch()
    m.train()
    reused = []
    stacked = latent._stacked

    def spy(feature, inputs, embedded):
        out = stacked(feature, inputs, embedded)
        reused.append(out is embedded)
        return out

    monkeypatch.setattr(latent, "_stacked", spy)
    m.training_loss(*b, packed=False)  # the padded loop, ``unroll`` (packed: test_packed.py)
    assert reused == [False, dropout == 0.0]  # features (s_i, E y_{i-1})
