"""Every softness of RNNsearch, Luong and the captioner, pinned: in float64 on random weights
with fixed seeds, the teacher-forced outputs at test and in training, the training loss, its
gradient and two SGD updates (the update counter, the baseline), the loss at test, the exact
token scores and four greedy steps. The numbers in softness_pinned.json were recorded once from
the implementation and are compared to 1e-12: a change of what any softness computes, or of the
order in which it draws its samples, moves one of them.

Each number is a probe: Σ x ⊙ w of a tensor x with fixed random weights w (seeded by the
tensor's size), so that every entry of x counts. ``python tests/models/test_softness_pinned.py``
writes the file anew: only for a change of the numbers that is meant."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from _seq2seq import padded_batch

from attnkit.data import digit_captions as dc
from attnkit.data import digits
from attnkit.data.vocab import Vocab
from attnkit.experiments.softness.captions import caption_token_scores
from attnkit.models import build_model
from attnkit.models.latent import token_scores

SEQ2SEQ_CASES: dict[str, dict[str, Any]] = {
    "soft": dict(softness="soft"),
    "mean": dict(softness="mean"),
    "exact": dict(softness="exact"),
    "hard": dict(softness="hard"),
    "hard-soft-baseline": dict(softness="hard", reward_baseline="soft"),
    "hard-deng": dict(softness="hard", decoder="deng"),
    "gumbel": dict(softness="gumbel", tau_steps=2),
    "variational": dict(softness="variational"),
    "variational-sample": dict(softness="variational", estimator="sample"),
    "variational-sample-soft": dict(
        softness="variational", estimator="sample", reward_baseline="soft"
    ),
}
CAPTION_CASES: dict[str, dict[str, Any]] = {
    "soft": dict(softness="soft", doubly_stochastic=0.5),
    "mean": dict(softness="mean"),
    "hard": dict(softness="hard"),
    "hard-xu": dict(
        softness="hard",
        reward="mean",
        reward_scale=0.1,
        mix_per="batch",
        baseline_on="sampled",
        gate=False,
    ),  # fmt: skip
    "hard-expectation": dict(softness="hard", at_test="expectation", hard_mix=0.0),
    "gumbel": dict(softness="gumbel", tau_steps=2),
    "variational": dict(softness="variational"),
}


def probe(x: torch.Tensor | None) -> float | None:
    """Σ x ⊙ w, w ~ N(0, 1) seeded by x's size: one number that every entry of x moves."""
    if x is None:
        return None
    g = torch.Generator().manual_seed(x.numel())
    w = torch.randn(x.numel(), generator=g, dtype=torch.float64).view(x.shape)
    return float((x.detach().double() * w).sum())


def _randomise(m: torch.nn.Module, std: float) -> torch.nn.Module:
    for p in m.parameters():  # random weights of a visible scale (biases too)
        torch.nn.init.normal_(p, std=std)
    return m.double()


def _updates(m: Any, run: Any, out: dict[str, Any]) -> None:
    """Two SGD updates of the training loss (seeds 2 and 3): loss, output, gradient, and
    what the model counts."""
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m.train()
    for k in range(2):
        torch.manual_seed(2 + k)
        loss, o = run()
        out[f"loss{k}"] = float(loss.detach())
        out[f"loss{k}_logits"] = probe(o.logits)
        opt.zero_grad()
        loss.backward()
        out[f"grad{k}"] = sum(probe(p.grad) or 0.0 for p in m.parameters())
        opt.step()
    if hasattr(m, "updates"):
        out["updates"] = int(m.updates)
        out["baseline"] = float(m.baseline)


def seq2seq_numbers(name: str, case: str) -> dict[str, Any]:
    kw = SEQ2SEQ_CASES[case]
    if name == "luong" and kw.get("decoder") == "deng":
        kw = {**kw, "input_feeding": False}  # Deng's decoder feeds no context back
    torch.manual_seed(0)
    m: Any = build_model(name, preset="tiny", src_vocab=15, tgt_vocab=13, **kw)
    m = _randomise(m, 0.5)
    b = padded_batch()
    out: dict[str, Any] = {}
    m.eval()
    f = m(*b[:3])
    out["eval_logits"], out["eval_weights"] = probe(f.logits), probe(f.weights)
    m.train()
    torch.manual_seed(1)
    out["train_logits"] = probe(m(*b[:3]).logits)
    _updates(m, lambda: m.training_loss(*b, packed=False), out)
    m.eval()
    torch.manual_seed(4)
    out["eval_loss"] = float(m.training_loss(*b, packed=False)[0].detach())
    if case in ("soft", "mean"):
        out["packed_loss"] = float(m.training_loss(*b, packed=True)[0].detach())
    ll, elbo = token_scores(m, *b)
    out["ll"], out["elbo"] = probe(ll), probe(elbo)
    with torch.no_grad():
        memory = m.encode(b[0], b[1])
        state = m.init_state(memory)
        prev = torch.ones(5, dtype=torch.long)
        for t in range(4):
            logits, w, state = m.step(prev, state, memory)
            out[f"step{t}_logits"], out[f"step{t}_weights"] = probe(logits), probe(w)
            prev = logits.argmax(-1)
    return out


def _caption_batch():
    labels = digits.digit_images()[1]
    big = digits.Canvas(
        3, 3, tuple(digits.Placement(i, int(labels[i]), i % 3, i // 3) for i in range(4))
    )
    small = digits.Canvas(2, 2, (digits.Placement(7, int(labels[7]), 1, 1),))
    examples = [dc.CaptionExample(c, dc.caption_words(c)) for c in (big, small)]
    vocab = Vocab.build([e.words for e in examples])
    (b,) = dc.batches(examples, vocab, vocab, 2)
    return dataclasses.replace(b, image=b.image.double())


def caption_numbers(case: str) -> dict[str, Any]:
    torch.manual_seed(0)
    m: Any = build_model("captioner", src_vocab=4, tgt_vocab=14, preset="tiny", patch=4,
                         **CAPTION_CASES[case])  # fmt: skip
    m = _randomise(m, 0.3)
    b = _caption_batch()
    out: dict[str, Any] = {}
    m.eval()
    f = m(b.image, b.pixels, b.tgt_in)
    out["eval_logits"], out["eval_weights"] = probe(f.logits), probe(f.weights)
    m.train()
    torch.manual_seed(1)
    f = m(b.image, b.pixels, b.tgt_in)
    out["train_logits"], out["train_log_prob"] = probe(f.logits), probe(f.log_prob)
    _updates(m, lambda: m.training_loss(b), out)
    m.eval()
    torch.manual_seed(4)
    out["eval_loss"] = float(m.training_loss(b)[0].detach())
    ll, elbo = caption_token_scores(m, b)
    out["ll"], out["elbo"] = probe(ll), probe(elbo)
    captions, weights, grid = m.greedy(b.image, b.pixels)
    out["greedy"], out["greedy_weights"], out["grid"] = captions, probe(weights), list(grid)
    return out


def _close(got: Any, want: Any) -> bool:
    if isinstance(want, float) and math.isnan(want):  # the captioner's unset baseline
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, float):
        return isinstance(got, float) and math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)
    return bool(got == want)


def _check(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    wrong = {k: (got[k], want[k]) for k in want if not _close(got[k], want[k])}
    assert not wrong, wrong


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("case", list(SEQ2SEQ_CASES))
def test_seq2seq_softness_is_pinned(name: str, case: str) -> None:
    _check(seq2seq_numbers(name, case), PINNED[f"{name}/{case}"])


@pytest.mark.parametrize("case", list(CAPTION_CASES))
def test_captioner_softness_is_pinned(case: str) -> None:
    _check(caption_numbers(case), PINNED[f"captioner/{case}"])


def all_numbers() -> dict[str, dict[str, Any]]:
    numbers = {f"{n}/{c}": seq2seq_numbers(n, c) for n in ("rnnsearch", "luong")
               for c in SEQ2SEQ_CASES}  # fmt: skip
    return numbers | {f"captioner/{c}": caption_numbers(c) for c in CAPTION_CASES}


PINNED_FILE = Path(__file__).with_name("softness_pinned.json")
PINNED: dict[str, dict[str, Any]] = json.loads(PINNED_FILE.read_text())

if __name__ == "__main__":
    PINNED_FILE.write_text(json.dumps(all_numbers(), indent=1) + "\n")
