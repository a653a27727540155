import datetime as dt

import pytest

from attnkit.data.tasks import load_task


@pytest.mark.parametrize("name", ["copy", "reverse", "sort"])
def test_algorithmic_tasks(name: str) -> None:
    s = load_task(name, seed=1, train_size=200, valid_size=20, test_size=20, min_len=2, max_len=5)
    for e in s.train:
        assert 2 <= len(e.src) <= 5 and sorted(e.src, key=lambda t: int(t[1:])) == sorted(
            e.tgt, key=lambda t: int(t[1:])
        )
        assert all(e.src[i] == e.tgt[j] for i, j in e.links)  # alignments pair equal symbols
        assert sorted(i for i, _ in e.links) == list(range(len(e.src)))
    keys = [{tuple(e.src) for e in x} for x in (s.train, s.valid, s.test)]
    assert not (keys[0] & keys[2]) and not (keys[0] & keys[1])


def test_dates_map_to_iso() -> None:
    s = load_task("dates", seed=0, train_size=300, valid_size=10, test_size=10)
    styles = set()
    for e in s.train:
        dt.date.fromisoformat("".join(e.tgt))  # a valid ISO date
        text = "".join(e.src)
        styles.add("년" in text)
    assert styles == {True, False}  # Korean and English styles


def test_length_options_only_for_algorithmic_tasks() -> None:
    with pytest.raises(ValueError, match="copy, reverse and sort"):
        load_task("toy-ko", max_len=4)
    with pytest.raises(ValueError, match="distinct"):
        load_task("copy", train_size=100, valid_size=0, test_size=0, min_len=1, max_len=1)
