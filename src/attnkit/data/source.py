"""Where a run's data comes from, as a JSON-able spec stored in the checkpoint, so that
``attnkit evaluate`` can rebuild the same held-out split.

    {"task": "toy-ko", "task_seed": 0, ...}            a generated task
    {"train_tsv": "kor.txt", "tokenise": "word", ...}  a corpus file, split by seed
    {"train_src": "a.en", "train_tgt": "a.ko", ...}   line-aligned files

A corpus spec also records the sha256 of every file (``"sha256": {"train_tsv": ...}``): the
held-out split is a function of the file's bytes and the split seed, so ``evaluate`` rebuilds
exactly the pairs the run held out, from files the user names on its command line (never from
a path stored in a checkpoint), and refuses a file whose bytes changed.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

from .corpus import RawPair, ReadReport, corpus_splits, raw_parallel, raw_tsv, tokenise_pairs
from .example import Splits
from .tasks import TASKS, load_task
from .tokenisers import Tokeniser, tokenisers_of, train_spm

CHAR_TASKS = {t.name for t in TASKS.values() if t.join == ""}
CORPUS_KEYS = (
    "train_tsv", "train_src", "train_tgt", "valid_src", "valid_tgt", "test_src", "test_tgt"
)  # fmt: skip
# docs_csv: real documents of the docs task (docs.py); *_text: the lm task's text (lm_text.py)
FILE_KEYS = (*CORPUS_KEYS, "docs_csv", "train_text", "valid_text")


def sha256_of(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def with_hashes(spec: dict[str, Any]) -> dict[str, Any]:
    """A corpus spec with the sha256 of each file it names (a task spec as it is)."""
    named = {k: spec[k] for k in FILE_KEYS if spec.get(k)}
    return {**spec, "sha256": {k: sha256_of(v) for k, v in named.items()}} if named else spec


def spec_from_files(meta: dict[str, Any], given: dict[str, str | None]) -> dict[str, Any]:
    """The spec of a run trained on corpus files (its checkpoint meta), with the files the
    user named (``{"train_tsv": "kor.txt", ...}``) in place of the stored paths, after checking
    that each is the very file the run was trained on (same sha256)."""
    trained = [k for k in FILE_KEYS if meta.get(k)]
    named = {k: v for k, v in given.items() if v}
    flag = lambda k: "--" + k.replace("_", "-")  # noqa: E731
    if not trained:
        if named:
            raise ValueError(
                f"this model was trained on the generated task {meta.get('task')!r}, not on "
                f"files: drop {', '.join(map(flag, named))} (its split is rebuilt from the task)"
            )
        return meta
    if set(named) != set(trained):
        wanted = " ".join(f"{flag(k)} {Path(str(meta[k])).name}" for k in trained)
        raise ValueError(
            "this model was trained on corpus files; evaluate reads only files named on its "
            f"command line, so name the same ones: {wanted}"
        )
    hashes = meta.get("sha256") or {}
    for k in trained:
        if not Path(str(named[k])).is_file():
            raise FileNotFoundError(f"{flag(k)} {named[k]}: no such file")
        if k in hashes and sha256_of(str(named[k])) != hashes[k]:
            raise ValueError(
                f"{flag(k)} {named[k]} is not the file this model was trained on (its sha256 "
                "differs): the held-out split rebuilt from it would mix training pairs into the "
                "test set. Pass the original file"
            )
    return {**meta, **{k: str(Path(str(named[k])).resolve()) for k in trained}}


def tokeniser_of(spec: dict[str, Any]) -> str:
    if "task" in spec:
        return "char" if spec["task"] in CHAR_TASKS else "word"
    return str(spec.get("tokenise", "word"))


def _raw_train(spec: dict[str, Any]) -> tuple[list[RawPair], ReadReport]:
    strict = bool(spec.get("strict"))
    if spec.get("train_tsv"):
        return raw_tsv(spec["train_tsv"], strict=strict)
    if spec.get("train_src") and spec.get("train_tgt"):
        return raw_parallel(spec["train_src"], spec["train_tgt"], strict=strict)
    raise ValueError(
        "say what to train on: --task NAME, --train-tsv FILE, or --train-src FILE --train-tgt FILE"
    )


def _held_out(spec: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Explicit valid/test files, e.g. Multi30K's val and test_2016_flickr."""
    out = {}
    for split in ("valid", "test"):
        s, t = spec.get(f"{split}_src"), spec.get(f"{split}_tgt")
        if bool(s) != bool(t):
            raise ValueError(f"--{split}-src and --{split}-tgt go together")
        if s and t:
            out[split] = (str(s), str(t))
    if out and len(out) != 2:
        raise ValueError("give both --valid-src/--valid-tgt and --test-src/--test-tgt, or neither")
    return out


def fit_tokenisers(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with its subword models learned from the training split (``tokenise='spm'``;
    a spec that already carries them, or uses words or characters, is returned as it is).
    With corpus_splits (no held-out files) the models see the training pairs only."""
    if spec.get("tokenise") != "spm" or spec.get("spm"):
        return spec
    raw, _ = _raw_train(spec)
    if not _held_out(spec):
        raw = corpus_splits(raw, **_fractions(spec)).train
    size = int(spec.get("spm_vocab") or 8000)
    src = train_spm((r.src for r in raw), size)
    tgt = train_spm((r.tgt for r in raw), size)
    return {**spec, "spm": {"src": src.to_json(), "tgt": tgt.to_json()}}


def _fractions(spec: dict[str, Any]) -> dict[str, Any]:
    return dict(
        valid=spec.get("valid_fraction", 0.05),
        test=spec.get("test_fraction", 0.05),
        seed=spec.get("split_seed", 0),
    )


def tokenisers_for(spec: dict[str, Any]) -> tuple[Tokeniser, Tokeniser]:
    """(source, target) tokenisers of a spec, tasks included (a task implies word or char)."""
    return tokenisers_of({**spec, "tokenise": tokeniser_of(spec)})


def tokenise_source(sentence: str, spec: dict[str, Any]) -> list[str]:
    """A source sentence's tokens, as the run's training data was tokenised."""
    return tokenisers_for(spec)[0].encode(sentence)


def load_spec(spec: dict[str, Any], *, quiet: bool = False) -> Splits:
    if spec.get("task") == "lm":  # a text file (or generated text) cut into segments
        from .lm_text import lm_splits

        return lm_splits(spec)
    if spec.get("docs_csv"):
        from .docs import file_splits

        sizes = tuple(spec.get(k) for k in ("train_size", "valid_size", "test_size"))
        return file_splits(spec["docs_csv"], spec.get("task_seed", 0), sizes)  # type: ignore[arg-type]
    if spec.get("task"):
        return load_task(
            spec["task"],
            seed=spec.get("task_seed", 0),
            **{
                k: spec.get(k)
                for k in ("train_size", "valid_size", "test_size", "min_len", "max_len")
            },
        )
    pair = tokenisers_of(spec)
    max_len = int(spec.get("max_len") or 0)
    raw, report = _raw_train(spec)
    held = _held_out(spec)
    if not held:  # split the raw pairs first, so subwords are learned from train alone
        parts = corpus_splits(raw, **_fractions(spec))
        out = [
            tokenise_pairs(x, pair, report, max_len=max_len)
            for x in (parts.train, parts.valid, parts.test)
        ]
        report.kept = sum(len(x) for x in out)
        if not quiet:
            print(f"corpus: {report.summary()}", file=sys.stderr)
        return Splits(*out)
    train = tokenise_pairs(raw, pair, report, max_len=max_len)
    if not quiet:
        print(f"corpus (train): {report.summary()}", file=sys.stderr)
    held_out = {}
    for split, (s, t) in held.items():  # held-out sets are kept whole: no length filter
        r, rep = raw_parallel(s, t, strict=bool(spec.get("strict")))
        held_out[split] = tokenise_pairs(r, pair, rep)
        if rep.skipped:
            raise ValueError(f"{s}: {rep.summary()}; held-out files must have no empty lines")
    return Splits(train, held_out["valid"], held_out["test"])


__all__ = [
    "CORPUS_KEYS",
    "FILE_KEYS",
    "sha256_of",
    "spec_from_files",
    "with_hashes",
    "fit_tokenisers", "load_spec", "tokenise_source", "tokeniser_of", "tokenisers_for"]
