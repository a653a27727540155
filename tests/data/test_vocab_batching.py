import random

import pytest

from attnkit.data.batching import batches, bucket_order
from attnkit.data.example import Example
from attnkit.data.vocab import SPECIALS, Vocab


def test_vocab_specials_min_freq_and_json_round_trip() -> None:
    v = Vocab.build([["a", "b", "a"], ["c", "a", "b"]], min_freq=2)
    assert v.tokens[:4] == list(SPECIALS) and v.tokens[4:] == ["a", "b"]
    assert v.encode(["a", "c"], bos=True) == [1, 4, 3, 2]  # c is unknown
    assert v.decode([4, 5, 2, 4]) == ["a", "b"]
    assert Vocab.from_json(v.to_json()).tokens == v.tokens
    with pytest.raises(ValueError, match="min_freq"):
        Vocab.build([["a"]], min_freq=0)


def test_bucketed_batches_group_similar_lengths_and_cover_everything() -> None:
    lengths = [random.Random(i).randint(1, 30) for i in range(200)]
    order = bucket_order(lengths, 16, random.Random(0))
    assert sorted(i for b in order for i in b) == list(range(200))
    assert max(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in order) <= 4


def test_batch_tensors() -> None:
    ex = [Example(["x", "y"], ["p"]), Example(["x"], ["p", "q", "p"])]
    sv, tv = Vocab.build(e.src for e in ex), Vocab.build(e.tgt for e in ex)
    (b,) = batches(ex, sv, tv, 8)
    assert b.src.shape == (2, 3) and b.src_len.tolist() in ([2, 3], [3, 2])
    assert (b.tgt_in[:, 0] == 1).all()  # bos
    assert b.tokens == 2 + 4  # targets with eos
