"""Batched greedy and beam-search decoding for any ``Seq2Seq`` model.

Legend: B batch, K beam size, S source length, T output length, V target vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..data.vocab import Vocab
from ..models.base import Seq2Seq, select

BOS, EOS, PAD = Vocab.bos_id, Vocab.eos_id, Vocab.pad_id


@dataclass
class Decoded:
    """Decoded outputs, per example: token ids (without bos, up to eos), the attention
    weights (T_i + 1, S_i) or None, and the log-probability (beam: length-normalised)."""

    tokens: list[list[int]]  # per example, without bos, up to (not including) eos
    weights: list[Tensor | None]  # per example (T_i + 1, S_i): rows for its tokens and eos
    scores: list[float]  # log-probability (beam: length-normalised)


def default_max_len(src_len: Tensor) -> int:
    return int(src_len.max()) * 2 + 10


def no_specials(logits: Tensor) -> Tensor:
    """float32 logits with pad and bos ruled out: they are never generated."""
    specials = torch.tensor([PAD, BOS], device=logits.device)
    return logits.float().index_fill(-1, specials, float("-inf"))


def evaluating(model: Seq2Seq) -> None:
    """Evaluation mode for decoding, set only where some module is training: reading the
    flags is a quarter of what ``eval()`` costs on every call (a module tree walk each)."""
    if any(m.training for m in model.modules()):
        model.eval()


@torch.no_grad()
def greedy(model: Seq2Seq, src: Tensor, src_len: Tensor, max_len: int | None = None) -> Decoded:
    """Pick argmax at every step, for a whole batch at once. src (B, S), src_len (B,)."""
    evaluating(model)
    max_len = default_max_len(src_len) if max_len is None else max_len
    b = src.shape[0]
    memory = model.encode(src, src_len)
    state = model.init_state(memory)
    prev = torch.full((b,), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    out, att, score = [], [], torch.zeros(b, device=src.device)
    for _ in range(max_len):
        logits, w, state = model.step(prev, state, memory)  # (B, V), (B, S)
        logp = no_specials(logits).log_softmax(-1)  # (B, V)
        top, best = logp.max(-1)  # (B,) each: the first maximum, as argmax picks it
        score = score + torch.where(done, 0.0, top)
        best = torch.where(done, PAD, best)
        out.append(best)
        if w is not None:
            att.append(w)
        done = done | (best == EOS)
        prev = best
        if bool(done.all()):
            break
    ids = torch.stack(out, 1).tolist()  # (B, T)
    weights = torch.stack(att, 1) if att else None  # (B, T, S)
    return _finish(ids, weights, score.tolist(), src_len)


def _finish(
    ids: list[list[int]], weights: Tensor | None, scores: list[float], src_len: Tensor
) -> Decoded:
    tokens, ws = [], []
    for i, row in enumerate(ids):
        n = row.index(EOS) if EOS in row else len(row)
        tokens.append(row[:n])
        ws.append(None if weights is None else weights[i, : n + 1, : int(src_len[i])].cpu())
    return Decoded(tokens, ws, scores)


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    src: Tensor,
    src_len: Tensor,
    beam: int = 5,
    length_penalty: float = 1.0,
    max_len: int | None = None,
) -> Decoded:
    """Beam search over a batch. Finished hypotheses stay in the beam at a fixed score; the
    winner maximises log p(y|x) / |y|^α (α = ``length_penalty``; |y| counts eos; α=0: raw
    log-probability, α=1: per-token average)."""
    if beam < 1:
        raise ValueError(f"beam={beam}; it must be at least 1")
    evaluating(model)
    max_len = default_max_len(src_len) if max_len is None else max_len
    b, k, dev = src.shape[0], beam, src.device
    memory = model.encode(src, src_len)
    state = model.init_state(memory)  # one row per sentence: its K beams start alike, at bos
    prev = torch.full((b,), BOS, dtype=torch.long, device=dev)
    scores = torch.full((b, k), float("-inf"), device=dev)
    scores[:, 0] = 0.0  # only the first beam is live at the start
    done = torch.zeros(b, k, dtype=torch.bool, device=dev)
    lengths = torch.zeros(b, k, device=dev)
    hist = torch.zeros(b, k, 0, dtype=torch.long, device=dev)
    att: Tensor | None = None  # (B, K, t, S)
    finished: Tensor | None = None  # (V,)
    first_row = torch.arange(b, device=dev)[:, None] * k  # (B, 1): sentence b's rows start
    for i in range(max_len):
        logits, w, state = model.step(prev, state, memory)
        if i == 0:  # the first step ran once per sentence: its K beams share it
            memory = model.beam_memory(memory, k)
            logits = logits.repeat_interleave(k, 0)  # (B*K, V)
            w = None if w is None else w.repeat_interleave(k, 0)  # (B*K, S)
        logp = no_specials(logits).log_softmax(-1).view(b, k, -1)  # (B, K, V)
        v = logp.shape[-1]
        if finished is None:  # a finished hypothesis only extends by pad, at no cost
            finished = torch.full((v,), float("-inf"), device=dev).index_fill(
                0, torch.tensor([PAD], device=dev), 0.0
            )  # (V,)
        logp = torch.where(done[..., None], finished, logp)
        total = (scores[..., None] + logp).view(b, k * v)  # (B, K*V)
        scores, flat = total.topk(k, dim=-1)  # (B, K)
        origin, token = flat // v, flat % v  # (B, K)
        was_done = done.gather(1, origin)  # (B, K)
        lengths = lengths.gather(1, origin) + (~was_done).float()
        done = was_done | (token == EOS)
        hist = torch.cat([hist.gather(1, origin[..., None].expand_as(hist)), token[..., None]], 2)
        if w is not None:
            w = w.view(b, k, 1, -1)  # (B, K, 1, S)
            if att is not None:
                att = att.gather(1, origin[..., None, None].expand_as(att))
            w = w.gather(1, origin[..., None, None].expand_as(w))
            att = w if att is None else torch.cat([att, w], 2)  # (B, K, t, S)
        index = (origin + first_row).view(-1)  # (B*K,)
        state = select(state, index if i else index // k)  # after the first step: B rows
        prev = token.view(-1)
        if bool(done.all()):
            break
    norm = scores / lengths.clamp(min=1).pow(length_penalty)  # (B, K)
    best = norm.argmax(-1)  # (B,)
    ids = hist[torch.arange(b), best].tolist()  # (B, T)
    weights = None if att is None else att[torch.arange(b), best]  # (B, T, S)
    return _finish(ids, weights, norm[torch.arange(b), best].tolist(), src_len)


def decode(
    model: Seq2Seq,
    src: Tensor,
    src_len: Tensor,
    *,
    beam: int = 1,
    length_penalty: float = 1.0,
    max_len: int | None = None,
) -> Decoded:
    """Greedy with ``beam`` 1, else beam search. src (B, S), src_len (B,)."""
    if beam == 1:
        return greedy(model, src, src_len, max_len)
    return beam_search(model, src, src_len, beam, length_penalty, max_len)


__all__ = ["Decoded", "beam_search", "decode", "greedy"]
