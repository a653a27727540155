"""Subsets of Multi30K task 1 (Elliott et al. 2016) for the experiments that train on it
(heads, softness), read from ``../shared/data/multi30k``: ``{train,val,test_2016_flickr}
.{de,en}.gz``, raw text, line-aligned.

``write_subset`` copies, for each split, the first ``n`` pairs whose sides both have at most
``max_words`` whitespace-separated words (0: every pair) into a folder as plain text,
``{train,val,test}.{de,en}``. Every seed reads the same sentences: the seed only initialises
and orders the batches.
"""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path

SOURCE = Path("../shared/data/multi30k")  # from the project root, as the tests read it
"""Where the shared data sits, from the project root."""
SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr"}
"""Our split name -> the file stem of Multi30K's split."""


def _pairs(source: Path, split: str) -> list[tuple[str, str]]:
    sides = []
    for lang in ("de", "en"):
        with gzip.open(source / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
            sides.append(f.read().splitlines())
    if len(sides[0]) != len(sides[1]):
        raise ValueError(f"{source / split}.de.gz and .en.gz differ in lines "
                         f"({len(sides[0])} vs {len(sides[1])}): the data is damaged")  # fmt: skip
    return list(zip(sides[0], sides[1], strict=True))


def write_subset(folder: Path, counts: Mapping[str, int], *, max_words: int = 0,
                 source: Path = SOURCE, flags: str = "") -> dict[str, int]:  # fmt: skip
    """Write the first ``counts[name]`` pairs of each split (``SPLITS``: train, val, test)
    with at most ``max_words`` words a side (0: no limit) into ``folder``; returns the pairs
    each split kept, and how many it read to find them (``{name}_read``). FileNotFoundError
    when ``source`` is absent; ValueError when a split has fewer such pairs than asked for
    (``flags`` names the options that set the counts, for the message)."""
    if not source.is_dir():
        raise FileNotFoundError(
            f"{source} not found: the Multi30K settings read the shared data beside the "
            "project root (scripts/multi30k.sh fetches it); run from the root of a checkout "
            "that has it"
        )
    folder.mkdir(parents=True, exist_ok=True)
    kept: dict[str, int] = {}
    for name, n in counts.items():
        pairs = _pairs(source, SPLITS[name])
        short = [i for i, (de, en) in enumerate(pairs)
                 if not max_words or max(len(de.split()), len(en.split())) <= max_words]
        if len(short) < n:
            within = f" with at most {max_words} words a side" if max_words else ""
            raise ValueError(f"{source / SPLITS[name]}.de.gz has {len(short)} pairs{within}, "
                             f"fewer than the {n} asked for; lower {flags or 'the sizes'}")
        take = short[:n]
        for k, lang in enumerate(("de", "en")):
            text = "".join(pairs[i][k] + "\n" for i in take)
            (folder / f"{name}.{lang}").write_text(text, encoding="utf-8")
        kept[name] = n
        kept[f"{name}_read"] = take[-1] + 1 if take else 0
    return kept


__all__ = ["SOURCE", "SPLITS", "write_subset"]
