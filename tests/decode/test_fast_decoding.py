"""The Transformer's fast decoding (projected-key cache, a sentence's beams as queries of its
one memory, the first beam step once per sentence, attend's column path) finds exactly the
hypotheses, scores and attention weights of a slow reference decoder, written here, that
runs the teacher-forced pass over each sentence alone (no padding) for every prefix.

Random weights in float64, padded batches; the eos logit is raised so that hypotheses end at
different steps (beams finish at different times, sentences of one batch too)."""

from __future__ import annotations

import pytest
import torch
from _spies import only_path
from torch import Tensor

from attnkit.decode.search import beam_search, greedy
from attnkit.models import build_model
from attnkit.models.transformer import Transformer

pytestmark = pytest.mark.usefixtures("one_thread_module")

PAD, BOS, EOS = 0, 1, 2
MAX_LEN = 6


def make(seed: int, norm: str, scale: float, eos: float) -> tuple[Transformer, Tensor, Tensor]:
    """A random float64 Transformer, its matrices scaled by ``scale`` (outputs that depend
    more on the prefix) and ``eos`` on the eos logit's bias (cases picked so that hypotheses
    end at different steps), and a padded batch of 4 sources (lengths 7, 3, 5, 1)."""
    torch.manual_seed(seed)
    m = build_model("transformer", src_vocab=15, tgt_vocab=12, preset="tiny", heads=2,
                    dec_layers=2, norm=norm)  # fmt: skip
    m = m.double().eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() > 1:
                p.mul_(scale)
        m.out_bias[EOS] += eos
    src_len = torch.tensor([7, 3, 5, 1])
    src = torch.randint(3, 15, (4, 7))
    src[torch.arange(7)[None, :] >= src_len[:, None]] = PAD
    return m, src, src_len  # type: ignore[return-value]


# (seed, norm, scale, eos): greedy lengths [0, 6, 0, 1], [0, 1, 6, 6], [1, 0, 1, 6]
CASES = [(0, "post", 2.0, 4.0), (1, "post", 3.0, 3.0), (8, "pre", 3.0, 4.0)]


def step_logp(m: Transformer, src: Tensor, prefix: list[int]) -> tuple[Tensor, Tensor]:
    """The teacher-forced pass over one unpadded sentence and bos + ``prefix`` (with autograd
    on: attend's general paths, not the inference-only column path): the next token's
    log-probabilities as decoding forms them (float32, pad and bos ruled out) (V,), and the
    last layer's cross-attention averaged over heads, one row per fed token (T, S)."""
    with torch.enable_grad():
        out = m(src[None], torch.tensor([src.shape[0]]), torch.tensor([[BOS, *prefix]]))
    logits = out.logits[0, -1].detach().float()  # (V,)
    logits[[PAD, BOS]] = float("-inf")
    assert out.weights is not None
    return logits.log_softmax(-1), out.weights[0].detach()  # (V,), (T, S)


def reference_greedy(m: Transformer, src: Tensor) -> tuple[list[int], float, Tensor]:
    """Argmax of the teacher-forced pass, one token at a time: tokens (no eos), the summed
    log-probability (eos included), the weights (T+1, S)."""
    tokens: list[int] = []
    score = torch.zeros((), dtype=torch.float32)
    for _ in range(MAX_LEN):
        logp, weights = step_logp(m, src, tokens)
        best = int(logp.argmax())
        score = score + logp[best]
        if best == EOS:
            break
        tokens.append(best)
    return tokens, float(score), weights


def reference_beam(
    m: Transformer, src: Tensor, beam: int, alpha: float
) -> tuple[list[int], float, Tensor]:
    """Beam search written from its definition over the teacher-forced pass: keep the
    ``beam`` best (log-probability) extensions of the live hypotheses and the finished ones
    (which stay at their score); the winner maximises log p / |y|^α, |y| counting eos."""
    hyps: list[tuple[list[int], Tensor, bool]] = [([], torch.zeros((), dtype=torch.float32), False)]
    for _ in range(MAX_LEN):
        candidates = []
        for tokens, score, done in hyps:
            if done:
                candidates.append((tokens, score, True))
                continue
            logp, _ = step_logp(m, src, tokens)
            for tok in range(logp.shape[0]):
                if tok not in (PAD, BOS):
                    candidates.append(([*tokens, tok], score + logp[tok], tok == EOS))
        hyps = sorted(candidates, key=lambda h: float(h[1]), reverse=True)[:beam]
        if all(done for _, _, done in hyps):
            break

    def normalised(h: tuple[list[int], Tensor, bool]) -> Tensor:
        return h[1] / torch.tensor(float(len(h[0])), dtype=torch.float32).pow(alpha)

    tokens, _, done = best = max(hyps, key=lambda h: float(normalised(h)))
    words = tokens[:-1] if done else tokens
    _, weights = step_logp(m, src, words)
    return words, float(normalised(best)), weights


@pytest.mark.parametrize("case", CASES)
def test_greedy_equals_the_teacher_forced_argmax(case: tuple[int, str, float, float]) -> None:
    m, src, src_len = make(*case)
    with only_path("column"):  # every attention of this decoding took the column path
        got = greedy(m, src, src_len, max_len=MAX_LEN)
    lengths = set()
    for i, n in enumerate(src_len.tolist()):
        tokens, score, weights = reference_greedy(m, src[i, :n])
        lengths.add(len(tokens))
        assert got.tokens[i] == tokens
        assert got.scores[i] == pytest.approx(score, rel=1e-6, abs=1e-6)
        rows = min(len(tokens) + 1, MAX_LEN)  # its tokens and eos, if it ended in time
        torch.testing.assert_close(got.weights[i], weights[:rows], rtol=0, atol=1e-9)
    assert len(lengths) > 1  # the batch's sentences ended at different steps


@pytest.mark.parametrize("case,beam,alpha", [(CASES[0], 2, 0.6), (CASES[1], 3, 1.0),
                                             (CASES[2], 4, 0.0)])  # fmt: skip
def test_beam_search_equals_the_reference_beam(
    case: tuple[int, str, float, float], beam: int, alpha: float
) -> None:
    m, src, src_len = make(*case)
    with only_path("column"):
        got = beam_search(m, src, src_len, beam=beam, length_penalty=alpha, max_len=MAX_LEN)
    for i, n in enumerate(src_len.tolist()):
        tokens, score, weights = reference_beam(m, src[i, :n], beam, alpha)
        assert got.tokens[i] == tokens
        assert got.scores[i] == pytest.approx(score, rel=1e-6, abs=1e-6)
        rows = min(len(tokens) + 1, MAX_LEN)
        torch.testing.assert_close(got.weights[i], weights[:rows], rtol=0, atol=1e-9)
