"""Decoding a trained ``Seq2Seq`` model: greedy and beam search over token ids (search.py),
and whole examples translated in batches (translate.py). Used by training, evaluation and
the viewers alike, so that none of them imports another."""

from .search import Decoded, beam_search, decode, greedy
from .translate import Translations, translate

__all__ = ["Decoded", "Translations", "beam_search", "decode", "greedy", "translate"]
