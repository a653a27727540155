"""Which noun a head looks at from the pronoun, and how often that choice flips with the
adjective over minimal pairs (the same frame, nouns, fillers and opener; the adjective
flipped, so the referent flips).

    mass of head (l, h) on a noun, sentence b:  m = Σ_{k ∈ phrase} α^{l,h}[q_b, k]
        phrase = the noun's words ("the", fillers, noun), as Fig. 4 shows the weight on
        "The" and "Law"; ``noun`` variant: the noun's position alone
    top noun: the referent when m(referent) > m(other noun) (a tie is no pick)
    follows(l, h) = share of pairs (a, b) whose top noun is the referent in both sentences
                    (the head's choice flips with the adjective, to the right noun);
                    a coin per sentence scores 1/4, a head blind to the adjective 0
    flips(l, h)   = share of pairs whose top noun differs between the two sentences
                    (either way round); a coin scores 1/2, a head blind to the adjective 0

q is the query row that reads the pronoun: in the encoder the pronoun's own position; in the
decoder the position that predicts the pronoun's target word. Keys: source positions
(encoder, cross-attention) or target positions (decoder self-attention: the word at target
position j is fed at position j + 1).

Legend: B sentences (pairs interleaved: 2i and 2i + 1 are pair i), L layers, H heads, Q
queries, K keys.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .data import Batch

KINDS = ("enc-self", "cross", "dec-self")  # the attentions measured; the claim reads enc-self
SPANS = ("phrase", "noun")  # what a noun's mass sums over; the claim reads phrase


def masses(weights: Tensor, query: Tensor, right: Tensor, wrong: Tensor) -> tuple[Tensor, Tensor]:
    """weights (B, L, H, Q, K), query positions (B,), key masks (B, K) -> the query row's
    summed weight on the right keys and on the wrong keys, (B, L, H) each."""
    rows = weights[torch.arange(len(weights)), :, :, query]  # (B, L, H, K)
    return (rows * right[:, None, None]).sum(-1), (rows * wrong[:, None, None]).sum(-1)


def keys_of(kind: str, span: str, batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
    """(query positions (B,), right-key mask (B, K), wrong-key mask (B, K)) for the attention
    ``kind`` and the noun ``span``."""
    if kind not in KINDS or span not in SPANS:
        raise ValueError(f"unknown attention {kind!r} or span {span!r}; choose of {KINDS}, "
                         f"{SPANS}")  # fmt: skip
    if span == "phrase":
        right, wrong = batch.referent_phrase, batch.other_phrase  # (B, S) each
    else:
        eye = torch.eye(batch.src.shape[1], dtype=torch.bool)  # (S, S)
        right, wrong = eye[batch.referent], eye[batch.other]  # (B, S) each
    if kind == "dec-self":  # target word j is fed at position j + 1
        right, wrong = (F.pad(m, (1, 0))[:, :-1] for m in (right, wrong))
    return batch.pronoun, right, wrong


def pair_rates(picks: Tensor) -> tuple[Tensor, Tensor]:
    """picks (2N, L, H) bool, pairs interleaved -> (follows, flips) (L, H) each: the share of
    pairs whose top noun is the referent in both sentences, and whose top noun differs."""
    if len(picks) % 2:
        raise ValueError(f"{len(picks)} sentences: minimal pairs come two by two")
    a, b = picks[0::2].float(), picks[1::2].float()  # (N, L, H) each
    follows = (a * b).mean(dim=0)  # (L, H)
    flips = (a == b).float().mean(dim=0)  # referents differ: same pick flag = top noun flipped
    return follows, flips


def best_head(rates: Tensor) -> tuple[int, int]:
    """(layer, head) of the largest rate (L, H); the first on a tie."""
    flat = int(rates.flatten().argmax())
    return divmod(flat, rates.shape[1])


__all__ = ["KINDS", "SPANS", "best_head", "keys_of", "masses", "pair_rates"]
