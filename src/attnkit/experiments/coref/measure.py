"""Which noun an encoder head looks at from the pronoun, and how often that choice follows
the referent over minimal pairs (the same frame, nouns, fillers and opener; the adjective
flipped, so the referent flips).

    mass of head (l, h) on a noun, sentence b:  m = Σ_{k ∈ phrase} α^{l,h}[q_b, k]
        phrase = the noun's words ("the", fillers, noun), as Vaswani et al. (2017, Fig. 4)
        show the weight on "The" and "Law"; ``noun`` variant: the noun's position alone
    top noun: the referent when m(referent) > m(other noun) (a tie is no pick)
    follows(l, h) = share of pairs (a, b) whose top noun is the referent in both sentences
                    (the head's choice flips with the adjective, to the right noun);
                    a coin per sentence scores 1/4, a head blind to the adjective 0
    flips(l, h)   = share of pairs whose top noun differs between the two sentences
                    (either way round); a coin scores 1/2, a head blind to the adjective 0
    margin(l, h)  = follows − anti-follows = 2·follows − flips, anti-follows being the
                    share of pairs whose top noun is the *other* noun in both sentences:
                    0 in expectation for every head whose choice does not depend on the
                    referent (a coin, a head blind to the adjective, a head that prefers
                    one noun by position), and 1 for a head that always follows

q is the pronoun's own position (the query row the tagger reads out).

Legend: B sentences (pairs interleaved: 2i and 2i + 1 are pair i), L layers, H heads, Q
queries, K keys.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .data import Batch

SPANS = ("phrase", "noun")  # what a noun's mass sums over; the claim reads phrase


def masses(weights: Tensor, query: Tensor, right: Tensor, wrong: Tensor) -> tuple[Tensor, Tensor]:
    """weights (B, L, H, Q, K), query positions (B,), key masks (B, K) -> the query row's
    summed weight on the right keys and on the wrong keys, (B, L, H) each."""
    rows = weights[torch.arange(len(weights)), :, :, query]  # (B, L, H, K)
    return (rows * right[:, None, None]).sum(-1), (rows * wrong[:, None, None]).sum(-1)


def keys_of(span: str, batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
    """(query positions (B,), right-key mask (B, K), wrong-key mask (B, K)) for the noun
    ``span``: the referent's and the other noun's."""
    if span not in SPANS:
        raise ValueError(f"unknown span {span!r}; choose one of {SPANS}")
    if span == "phrase":
        return batch.pronoun, batch.referent_phrase, batch.other_phrase  # (B,), (B, S) each
    eye = torch.eye(batch.src.shape[1], dtype=torch.bool)  # (S, S)
    return batch.pronoun, eye[batch.referent], eye[batch.other]  # (B,), (B, S) each


def pair_rates(picks: Tensor) -> tuple[Tensor, Tensor]:
    """picks (2N, L, H) bool, pairs interleaved -> (follows, flips) (L, H) each: the share of
    pairs whose top noun is the referent in both sentences, and whose top noun differs."""
    if len(picks) % 2:
        raise ValueError(f"{len(picks)} sentences: minimal pairs come two by two")
    a, b = picks[0::2].float(), picks[1::2].float()  # (N, L, H) each
    follows = (a * b).mean(dim=0)  # (L, H)
    flips = (a == b).float().mean(dim=0)  # referents differ: same pick flag = top noun flipped
    return follows, flips


def margin(follows: Tensor, flips: Tensor) -> Tensor:
    """(follows, flips) (L, H) each -> follows − anti-follows = 2·follows − flips (L, H)."""
    return 2 * follows - flips


def margins(rates: dict[str, Any]) -> Tensor:
    """A head-rates record (``jobs.head_rates``: "follows" and "flips" as L × H lists) ->
    every head's margin (L, H)."""
    return margin(torch.tensor(rates["follows"]), torch.tensor(rates["flips"]))


def best_head(rates: Tensor) -> tuple[int, int]:
    """(layer, head) of the largest rate (L, H); the first on a tie."""
    flat = int(rates.flatten().argmax())
    return divmod(flat, rates.shape[1])


__all__ = ["SPANS", "best_head", "keys_of", "margin", "margins", "masses", "pair_rates"]
