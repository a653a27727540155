"""``attnkit translate``: translate sentences with a trained checkpoint.

    attnkit translate --checkpoint runs/tf --show "I am a student"
    attnkit translate --checkpoint runs/tf --show --kind dec-self --layer 0 --head 1 "I am"

Without --kind/--layer/--head, --show and --save-attention draw the weights the decoder
returned (the RNNs' attention; the Transformer's last-layer cross-attention, mean of heads).
With any of them, the model is teacher-forced on each translation and the chosen map is
drawn: --kind enc-self | dec-self | cross (default cross), --layer (default the last),
--head (default: the mean in the terminal, every head in the image).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from .view import KINDS


def add_parser(sub: Any) -> None:
    p = sub.add_parser("translate", help="translate sentences with a trained checkpoint")
    p.add_argument("sentences", nargs="*", help="source sentences (default: one per stdin line)")
    p.add_argument("--checkpoint", required=True, help="a checkpoint or `attnkit train` folder")
    p.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy)")
    p.add_argument(
        "--length-penalty", type=float, default=1.0, help="beam score = log p / length^alpha"
    )
    p.add_argument(
        "--save-attention",
        default=None,
        metavar="FILE.png",
        help="heatmap of the first sentence's attention (FILE-2.png for the 2nd, ...)",
    )
    p.add_argument(
        "--show",
        action="store_true",
        help="print a terminal heatmap of each translation's attention",
    )
    p.add_argument(
        "--kind",
        choices=KINDS,
        default=None,
        help="which attention --show/--save-attention draw (default cross; enc-self and "
        "dec-self need a model that has them: the Transformer)",
    )
    p.add_argument("--layer", type=int, default=None, help="layer to draw (default the last)")
    p.add_argument(
        "--head",
        default=None,
        help="head index or 'mean' (default: the terminal shows the mean, the image every head)",
    )
    p.add_argument(
        "--max-input-len",
        type=int,
        default=1000,
        help="longest source in tokens: a longer one is an error naming its "
        "line, or is cut with --truncate",
    )
    p.add_argument("--truncate", action="store_true", help="cut sources over --max-input-len")
    p.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="sentences decoded at once; each batch is printed when it is done",
    )
    p.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read sources (arguments, else stdin line by line), translate them a batch at a time and
    print each batch as soon as it is decoded: input of any length streams through in bounded
    memory, with a progress bar on a terminal; from stdin with stderr not a terminal, a progress
    line every 10 batches or 30 s (lines done, lines/s, and the ETA when stdin is a file)."""
    from tqdm import tqdm

    from .._progress import Progress, lines_wanted
    from ..tasks.registry import family, model_family
    from ..train import checkpoint
    from ..train.runtime import pick_device

    if _chosen(args) and not (args.show or args.save_attention):
        raise ValueError(
            "--kind/--layer/--head choose what --show and --save-attention draw; add one of them"
        )
    if args.max_input_len < 1 or args.batch_size < 1 or args.beam < 1:
        raise ValueError(
            f"--max-input-len {args.max_input_len}, --batch-size {args.batch_size}, --beam "
            f"{args.beam}: each must be at least 1"
        )
    loaded = checkpoint.load(args.checkpoint, pick_device(args.device))
    kind = model_family(loaded.model_name)
    if not family(kind).translates:
        raise ValueError(
            f"{loaded.model_name} is a {kind} model, not a translation model: score it with "
            f"attnkit evaluate --checkpoint {args.checkpoint}, look at it with attnkit view "
            f"--checkpoint {args.checkpoint} --example N"
        )
    bar = tqdm(
        desc="translating",
        unit=" sentences",
        disable=bool(args.sentences) or not sys.stderr.isatty(),
        file=sys.stderr,
        leave=False,
    )
    lines = not args.sentences and lines_wanted()
    total = _lines_left() if lines else None
    report = Progress("translating", unit="lines", total=total, every=10 * args.batch_size)
    done = sentences = 0
    for chunk in _chunks(_sources(args), args.batch_size):
        if done == 0 and not any(text.strip() for _, text in chunk):
            break  # only blank lines: nothing to translate
        sentences += _translate_chunk(args, loaded, chunk, sentences, bar)
        done += len(chunk)
        bar.update(len(chunk))
        if lines:
            report.update(len(chunk))
    bar.close()
    if done == 0:
        raise ValueError("nothing to translate: give sentences as arguments or on stdin")
    return 0


def _sources(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(where, text) of each source: "sentence N" of the arguments, or "line N" of stdin,
    read one line at a time as strict UTF-8. A blank line of stdin is yielded too (its
    translation is a blank line: one output line per input line, so ``translate < src > hyp``
    stays aligned with ``src``)."""
    from ..data.corpus import decode_line

    if args.sentences:
        for n, text in enumerate(args.sentences, start=1):
            if any("\udc80" <= c <= "\udcff" for c in text):  # undecodable bytes of argv
                raise ValueError(f"sentence {n} is not valid UTF-8 text; convert it to UTF-8")
            yield f"sentence {n}", text
        return
    binary = getattr(sys.stdin, "buffer", None)
    lines = enumerate(binary if binary is not None else sys.stdin, start=1)
    for n, raw in lines:
        text = decode_line(raw, n, "<stdin>") if isinstance(raw, bytes) else raw.rstrip("\r\n")
        yield f"line {n}", text


def _lines_left() -> int | None:
    """The lines left on stdin when it is a regular file (``< FILE``: read ahead, then
    rewound); None for a pipe or anything else that cannot be rewound."""
    import os
    import stat

    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(binary.fileno()).st_mode)
        if not (regular and binary.seekable()):
            return None
        start = binary.tell()
        count = sum(1 for _ in binary)
        binary.seek(start)
    except (AttributeError, OSError, ValueError):
        return None
    return count


def _chunks(items: Iterator[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    """Batches of ``size`` sources that are not blank, each with the blank lines among them."""
    chunk: list[tuple[str, str]] = []
    real = 0
    for item in items:
        chunk.append(item)
        real += bool(item[1].strip())
        if real == size:
            yield chunk
            chunk, real = [], 0
    if chunk:
        yield chunk


def _translate_chunk(
    args: argparse.Namespace, loaded: Any, chunk: list[tuple[str, str]], first: int, bar: Any
) -> int:
    """Tokenise, check, decode and print one batch of sources, a blank line for each blank
    one; ``first``: how many sentences came before (numbers the --save-attention files).
    Returns the number of sentences (not blank) translated."""
    from pathlib import Path

    from .._text import printable
    from ..data.example import Example
    from ..data.source import tokenise_source, tokenisers_for
    from ..decode import translate

    examples = []
    blank = [not text.strip() for _, text in chunk]
    for where, text in (item for item, b in zip(chunk, blank, strict=True) if not b):
        src = tokenise_source(text, loaded.meta)
        if not src:
            raise ValueError(f"{where} is empty")
        if len(src) > args.max_input_len:
            if not args.truncate:
                raise ValueError(
                    f"{where} has {len(src):,} tokens, over --max-input-len "
                    f"{args.max_input_len}: split it, raise --max-input-len, or pass --truncate"
                )
            print(f"warning: {where} cut to {args.max_input_len} of {len(src):,} tokens",
                  file=sys.stderr)  # fmt: skip
            src = src[: args.max_input_len]
        unknown = sorted({t for t in src if t not in loaded.src_vocab.index})
        if unknown:
            print(
                f"warning: {where} has tokens the model never saw in training (read as <unk>): "
                + printable(" ".join(unknown)),
                file=sys.stderr,
            )
        examples.append(Example(src, []))
    results: Iterator[tuple[Any, Any, Any]] = iter([])
    if examples:  # (a last chunk may hold only the blank lines after the last sentence)
        out = translate(
            loaded.model,
            examples,
            loaded.src_vocab,
            loaded.tgt_vocab,
            batch_size=args.batch_size,
            beam=args.beam,
            length_penalty=args.length_penalty,
        )
        results = iter(zip(examples, out.hyps, out.weights, strict=True))
    detok = tokenisers_for(loaded.meta)[1].decode  # subwords are printed as detokenised text
    shown = printable if sys.stdout.isatty() else (lambda t: t)  # a file gets the text as is
    i = -1
    for is_blank in blank:
        if is_blank:
            bar.write("", file=sys.stdout)
            continue
        i, (e, hyp, w) = i + 1, next(results)
        bar.write(shown(detok(hyp)), file=sys.stdout)
        if args.show:
            bar.write(_heatmap_text(args, loaded, e.src, hyp, w) + "\n", file=sys.stdout)
        if args.save_attention:
            base, k = Path(args.save_attention), first + i
            path = base if k == 0 else base.with_name(f"{base.stem}-{k + 1}{base.suffix}")
            _draw(args, loaded, e.src, hyp, w, path)
            print(f"attention heatmap: {path}", file=sys.stderr)
    sys.stdout.flush()
    return len(examples)


def _chosen(args: argparse.Namespace) -> bool:
    """True when --kind/--layer/--head pick a map (else: the weights the decoder returned)."""
    return any(x is not None for x in (args.kind, args.layer, args.head))


def _head(args: argparse.Namespace) -> int | str | None:
    from .view import _parse_head

    return _parse_head(args.head)


def _picked(args: argparse.Namespace, loaded: Any, src: list[str], hyp: list[str], w: Any) -> Any:
    """The --kind map of one translation, teacher-forced on it (an AttentionRecord)."""
    from ..viz.from_checkpoint import hypothesis_maps, select_map

    maps = hypothesis_maps(loaded, src, hyp, w)
    layer = -1 if args.layer is None else args.layer
    return select_map(maps, args.kind or "cross", loaded.model_name, layer=layer, head=_head(args))


def _heatmap_text(
    args: argparse.Namespace, loaded: Any, src: list[str], hyp: list[str], w: Any
) -> str:
    from ..viz.from_checkpoint import translation_heatmap
    from ..viz.terminal import terminal_heatmap

    if not _chosen(args) or w is None:
        return translation_heatmap(src, hyp, w, loaded.src_vocab)
    record = _picked(args, loaded, src, hyp, w)
    head = _head(args)
    return terminal_heatmap(
        record.weights,
        record.tgt_tokens,
        record.src_tokens,
        layer=-1 if args.layer is None else args.layer,
        heads=head if isinstance(head, int) else None,
    )


def _draw(
    args: argparse.Namespace, loaded: Any, src: list[str], hyp: list[str], w: Any, path: Any
) -> None:
    from ..viz import heatmap
    from ..viz.from_checkpoint import source_tokens

    if w is None:
        raise ValueError(f"{loaded.model_name} has no attention to draw")

    def shown(tokens: list[str] | None) -> list[str] | None:  # a space token is drawn as _
        return None if tokens is None else ["_" if t == " " else t for t in tokens]

    if not _chosen(args):
        keys = shown(source_tokens(src, loaded.src_vocab))
        heatmap(w, (shown([*hyp, "<eos>"]) or [])[: w.shape[0]], keys, path=path)
        return
    record = _picked(args, loaded, src, hyp, w)
    kind = args.kind or "cross"
    heatmap(
        record.weights,
        shown(record.tgt_tokens) or [],
        shown(record.src_tokens),
        layer=-1 if args.layer is None else args.layer,
        heads=_head(args),
        path=path,
        title=None if kind == "cross" else kind,
    )
