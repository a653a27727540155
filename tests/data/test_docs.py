"""The docs task: generated documents are labelled right by construction (the key sentence's
polarity word), the key sits anywhere; real (label, text) files are read, split by seed, and
their sha256 is kept with the path so evaluate/view rebuild the split only from the same file."""

from collections import Counter

import pytest

from attnkit.data import docs, source, tasks
from attnkit.data.tasks import load_task
from attnkit.train.config import DataConfig


def test_generated_documents_are_labelled_by_their_key_sentence():
    made = docs.generate(400, seed=3)
    assert made == docs.generate(400, seed=3)  # seeded
    positions = Counter()
    for d in made:
        assert 4 <= len(d.sentences) <= 10
        assert all(4 <= len(s) <= 10 for s in d.sentences)
        marked = [i for i, s in enumerate(d.sentences) if docs.MARKER in s]
        assert marked == [d.key]  # exactly one key sentence, and it is d.key
        for s in d.sentences:  # one polarity word per sentence
            assert sum(w in docs.POSITIVE + docs.NEGATIVE for w in s) == 1
        word = next(w for w in d.sentences[d.key] if w in docs.POSITIVE + docs.NEGATIVE)
        assert d.label == ("pos" if word in docs.POSITIVE else "neg")
        positions[d.key] += 1
    assert len(positions) >= 8  # the key sentence's position varies
    labels = Counter(d.label for d in made)
    assert 150 < labels["pos"] < 250
    # the distractors disagree with the label often: a bag of polarity words cannot decide it
    disagree = sum(
        any(w in (docs.NEGATIVE if d.label == "pos" else docs.POSITIVE) for w in s)
        for d in made for i, s in enumerate(d.sentences) if i != d.key
    )  # fmt: skip
    assert disagree > 0.4 * sum(len(d.sentences) - 1 for d in made)


def test_the_task_is_registered_with_its_family():
    splits = load_task("docs", seed=1, train_size=20, valid_size=5, test_size=5)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (20, 5, 5)
    assert tasks.task_family("docs") == "docs"
    with pytest.raises(ValueError, match="need 1 <= min_sents"):
        docs.generate(3, 0, min_sents=0)


def test_sentences_of_cuts_sentences_and_tokens():
    assert docs.sentences_of("Great cast. Dull plot!  Why?") == (
        ("great", "cast", "."), ("dull", "plot", "!"), ("why", "?"),
    )  # fmt: skip


def _write(path, rows, sep):
    path.write_text("\n".join(sep.join(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_a_real_csv_or_tsv_is_read_split_and_hashed(tmp_path):
    rows = [("label", "text")] + [
        ("pos" if i % 2 else "neg", f"Doc {i} is here. It has, two sentences!") for i in range(30)
    ]
    csv_file = _write(tmp_path / "d.csv", [(a, f'"{b}"') for a, b in rows] + [("", "x")], ",")
    tsv_file = _write(tmp_path / "d.tsv", rows + [("pos", "")], "\t")
    for f in (csv_file, tsv_file):
        read, skipped = docs.read_labelled(f)
        assert len(read) == 30 and skipped == 1
        assert read[0].label == "neg" and read[0].key == -1
        assert read[0].sentences == (("doc", "0", "is", "here", "."),
                                     ("it", "has", ",", "two", "sentences", "!"))  # fmt: skip
    data = DataConfig(task="docs", docs_csv=str(csv_file), task_seed=4)
    spec = source.with_hashes(data.spec())
    assert spec["docs_csv"] == str(csv_file.resolve())
    assert spec["sha256"]["docs_csv"] == source.sha256_of(csv_file)
    splits = source.load_spec(spec)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (24, 3, 3)
    assert splits == source.load_spec(spec)  # the same split again
    # evaluate/view: the same file must be named, and a changed file is refused
    with pytest.raises(ValueError, match="--docs-csv d.csv"):
        source.spec_from_files(spec, {})
    copy = _write(tmp_path / "other.csv", [(a, f'"{b}"') for a, b in rows], ",")
    with pytest.raises(ValueError, match="sha256"):
        source.spec_from_files(spec, {"docs_csv": str(copy)})
    assert source.spec_from_files(spec, {"docs_csv": str(csv_file)})["docs_csv"]


def test_bad_docs_settings_fail_clearly(tmp_path):
    with pytest.raises(ValueError, match="^docs_csv goes with task docs"):
        DataConfig(task="toy-ko", docs_csv="x.csv")
    with pytest.raises(FileNotFoundError, match="no such file"):
        docs.read_labelled(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="cannot make"):
        docs.split_sizes(5, (10, None, None))
