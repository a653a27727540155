"""Score a translation model on any test set: a source file and one or more reference files.

    scores = score_files(loaded, "test.de", ["test.en"], beam=5)
    scores.bleu, scores.bleu_signature, scores.chrf, scores.length_ratio

The sources are tokenised with the checkpoint's own tokeniser (words, characters, or the
subword model stored in it), translated in batches, detokenised, and scored by sacreBLEU
(Post 2018) against the raw reference text, with its signature so that the number can be
compared with published ones. Files may be plain or gzip (``.gz``), strict UTF-8; line i of
every reference file is a reference for line i of the source file.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..data.corpus import read_lines
from ..data.example import Example


@dataclass
class FileScores:
    """sacreBLEU's corpus BLEU and chrF (0..100) with their signatures, and the length ratio
    (hypothesis length / reference length, in sacreBLEU's tokens: below 1 is what the brevity
    penalty punishes)."""

    n: int
    bleu: float
    bleu_signature: str
    chrf: float
    chrf_signature: str
    length_ratio: float
    hyps: list[str] = field(default_factory=list, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "hyps"}


def read_text(path: str | Path) -> list[str]:
    """Every line of ``path`` (plain or .gz, strict UTF-8), without newlines."""
    return [text for _, text in read_lines(path)]


def bleu_metric(tokenize: str) -> Any:
    """sacreBLEU's BLEU with tokeniser ``tokenize``; an unknown name, or one whose extra
    package is missing (ko-mecab, ja-mecab), is one ValueError saying what to pass."""
    from sacrebleu.metrics import BLEU

    if tokenize not in BLEU.TOKENIZERS:
        raise ValueError(
            f"--tokenize {tokenize!r}: sacreBLEU has no such tokeniser; choose one of "
            f"{', '.join(BLEU.TOKENIZERS)}"
        )
    try:
        return BLEU(tokenize=tokenize)
    except (RuntimeError, ImportError) as err:  # the tokeniser's own package is missing
        why = " ".join(str(err).split())
        raise ValueError(f"--tokenize {tokenize}: {why}") from None


def sacre_scores(hyps: Sequence[str], refs: Sequence[Sequence[str]], tokenize: str) -> FileScores:
    """sacreBLEU BLEU (with ``tokenize``) and chrF of ``hyps`` against the reference streams
    ``refs`` (each as long as ``hyps``)."""
    from sacrebleu.metrics import CHRF

    for stream in refs:
        if len(stream) != len(hyps):
            raise ValueError(f"{len(hyps)} hypotheses but a reference stream of {len(stream)}")
    bleu_of, chrf_metric = bleu_metric(tokenize), CHRF()
    refs_list = [list(r) for r in refs]
    bleu = bleu_of.corpus_score(list(hyps), refs_list)
    chrf = chrf_metric.corpus_score(list(hyps), refs_list)
    ratio = bleu.sys_len / bleu.ref_len if bleu.ref_len else 0.0
    return FileScores(
        n=len(hyps),
        bleu=float(bleu.score),
        bleu_signature=str(bleu_of.get_signature()),
        chrf=float(chrf.score),
        chrf_signature=str(chrf_metric.get_signature()),
        length_ratio=float(ratio),
        hyps=list(hyps),
    )


def score_files(
    loaded: Any,
    src: str | Path,
    refs: Sequence[str | Path],
    *,
    beam: int = 1,
    length_penalty: float = 1.0,
    batch_size: int = 64,
    max_input_len: int = 1000,
    tokenize: str = "13a",
    progress: bool = True,
) -> FileScores:
    """Translate every line of ``src`` with the checkpoint ``loaded`` and score the detokenised
    output against the lines of ``refs``. A line count that differs between the files, or a
    source line longer than ``max_input_len`` tokens, is a ValueError naming the file and
    line (nothing is silently dropped or cut)."""
    from ..data.source import tokenise_source, tokenisers_for

    if not refs:
        raise ValueError("give at least one reference file: --ref FILE")
    bleu_metric(tokenize)  # an unknown tokeniser is refused before any translation
    if batch_size < 1 or beam < 1 or max_input_len < 1:
        raise ValueError(
            f"--batch-size {batch_size}, --beam {beam}, --max-input-len {max_input_len}: "
            "each must be at least 1"
        )
    sources = read_text(src)
    streams = [read_text(r) for r in refs]
    for path, stream in zip(refs, streams, strict=True):
        if len(stream) != len(sources):
            raise ValueError(
                f"{path} has {len(stream):,} lines but {src} has {len(sources):,}: line i of "
                "every reference file must translate line i of the source file"
            )
    if not sources:
        raise ValueError(f"{src} has no lines to translate")
    examples = []
    for n, text in enumerate(sources, start=1):
        tokens = tokenise_source(text, loaded.meta)
        if len(tokens) > max_input_len:
            raise ValueError(
                f"{src}:{n} has {len(tokens):,} tokens, over --max-input-len {max_input_len}: "
                "raise --max-input-len or split the line"
            )
        examples.append(Example(tokens, []))
    detok = tokenisers_for(loaded.meta)[1].decode
    hyps = _translate_all(loaded, examples, beam, length_penalty, batch_size, progress)
    return sacre_scores([detok(h) for h in hyps], streams, tokenize)


def _translate_all(
    loaded: Any,
    examples: list[Example],
    beam: int,
    length_penalty: float,
    batch_size: int,
    progress: bool,
) -> list[list[str]]:
    """Hypotheses of every example (an empty source line gives an empty hypothesis), in
    chunks of ``batch_size`` with a progress bar on a terminal, else a progress line on stderr
    every 10 chunks or 30 s (lines done, lines/s, ETA)."""
    from tqdm import tqdm

    from .._progress import Progress, lines_wanted
    from ..decode import translate

    hyps: list[list[str]] = [[] for _ in examples]
    todo = [i for i, e in enumerate(examples) if e.src]
    bar = tqdm(
        total=len(todo),
        desc="translating",
        unit=" sentences",
        disable=not (progress and sys.stderr.isatty()),
        file=sys.stderr,
        leave=False,
    )
    lines = progress and lines_wanted()
    report = Progress("translating", unit="lines", total=len(todo), every=10 * batch_size)
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        out = translate(
            loaded.model,
            [examples[i] for i in chunk],
            loaded.src_vocab,
            loaded.tgt_vocab,
            batch_size=batch_size,
            beam=beam,
            length_penalty=length_penalty,
        )
        for i, h in zip(chunk, out.hyps, strict=True):
            hyps[i] = list(h)
        bar.update(len(chunk))
        if lines:
            report.update(len(chunk))
    bar.close()
    return hyps


__all__ = ["FileScores", "bleu_metric", "read_text", "sacre_scores", "score_files"]
