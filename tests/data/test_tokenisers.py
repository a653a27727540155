"""Tokenisers: words, characters, and SentencePiece subwords learned from the training split
only; held-out files kept whole."""

import pytest

from attnkit.data.source import fit_tokenisers, load_spec
from attnkit.data.tasks import load_task
from attnkit.data.tokenisers import (
    Chars,
    SentencePiece,
    Words,
    tokenisers_of,
    train_spm,
)


def sentences(n: int = 400, seed: int = 0) -> tuple[list[str], list[str]]:
    sp = load_task("toy-ko", seed=seed, train_size=n, valid_size=0, test_size=0)
    return [" ".join(e.src) for e in sp.train], [" ".join(e.tgt) for e in sp.train]


def test_words_and_chars_round_trip() -> None:
    assert Words().encode(" a  b\tc ") == ["a", "b", "c"]
    assert Words().decode(["a", "b"]) == "a b"
    assert Chars().encode(" 가  나 ") == ["가", " ", "나"]
    assert Chars().decode(Chars().encode("가 나")) == "가 나"


def test_spm_round_trips_text_and_splits_rare_words() -> None:
    en, _ = sentences()
    sp = train_spm(en, 120)
    assert 100 <= sp.sp.GetPieceSize() <= 120
    for s in en[:50]:
        pieces = sp.encode(s)
        assert sp.decode(pieces) == s
        assert pieces[0].startswith("\u2581")  # word-initial pieces carry the ▁ marker
    # a word never seen is still spelt out in known pieces, not <unk>
    assert sp.decode(sp.encode("I am a zebra")) == "I am a zebra"
    assert len(sp.encode("zebra")) > 1


def test_spm_is_deterministic_and_round_trips_through_json() -> None:
    en, _ = sentences()
    a, b = train_spm(en, 100), train_spm(en, 100)
    assert a.model == b.model
    c = SentencePiece.from_json(a.to_json())
    assert c.encode(en[0]) == a.encode(en[0])


def test_spm_errors_say_what_to_do() -> None:
    with pytest.raises(ValueError, match="lower --spm-vocab"):
        train_spm(["a b", "b c"], 5000)
    with pytest.raises(ValueError, match="raise --spm-vocab"):
        train_spm(["abcdefghijklmnopqrstuvwxyz"], 10)
    with pytest.raises(ValueError, match="at least 8"):
        train_spm(["a b"], 4)
    with pytest.raises(ValueError, match="no training sentences"):
        train_spm(["", " "], 100)
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        SentencePiece(b"not a protobuf at all")
    with pytest.raises(ValueError, match="carries no trained subword models"):
        tokenisers_of({"tokenise": "spm"})
    with pytest.raises(ValueError, match="unknown tokeniser"):
        tokenisers_of({"tokenise": "bytes"})


def write(path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return str(path)


def held_out_spec(tmp_path, test_src: list[str], test_tgt: list[str]) -> dict:
    en, ko = sentences(300)
    return {
        "tokenise": "spm",
        "spm_vocab": 200,
        "max_len": 8,
        "train_src": write(tmp_path / "train.en", en),
        "train_tgt": write(tmp_path / "train.ko", ko),
        "valid_src": write(tmp_path / "val.en", en[:5]),
        "valid_tgt": write(tmp_path / "val.ko", ko[:5]),
        "test_src": write(tmp_path / "test.en", test_src),
        "test_tgt": write(tmp_path / "test.ko", test_tgt),
    }


def test_subwords_are_learned_from_the_training_split_alone(tmp_path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    plain = fit_tokenisers(held_out_spec(tmp_path / "a", ["I run"], ["나는 달린다"]))
    odd = ["qqqq qqqq qqqq " * 20] * 50  # would dominate the merges if test text leaked in
    other = fit_tokenisers(held_out_spec(tmp_path / "b", odd, odd))
    assert plain["spm"] == other["spm"]
    assert fit_tokenisers(plain) is plain  # already fitted: kept as it is


def test_held_out_files_are_kept_whole_and_carry_raw_references(tmp_path) -> None:
    long = "I see the big red dog and the small cat in the house today"
    spec = fit_tokenisers(held_out_spec(tmp_path, ["I run", long], ["나는 달린다", long]))
    splits = load_spec(spec, quiet=True)
    assert all(len(e.src) <= 8 and len(e.tgt) <= 8 for e in splits.train)  # max_len: train only
    assert len(splits.valid) == 5 and len(splits.test) == 2
    assert splits.test[1].ref == long and len(splits.test[1].src) > 8
    _, tgt_tok = tokenisers_of(spec)
    assert tgt_tok.decode(splits.test[0].tgt) == "나는 달린다"


def test_valid_and_test_files_go_together(tmp_path) -> None:
    spec = held_out_spec(tmp_path, ["a"], ["b"])
    del spec["test_tgt"]
    with pytest.raises(ValueError, match="--test-src and --test-tgt go together"):
        fit_tokenisers(spec)
