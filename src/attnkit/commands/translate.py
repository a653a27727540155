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
    p.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..data.example import Example
    from ..data.source import tokenise_source as tokenise
    from ..decode import translate
    from ..train import checkpoint
    from ..train.runtime import pick_device

    if _chosen(args) and not (args.show or args.save_attention):
        raise ValueError(
            "--kind/--layer/--head choose what --show and --save-attention draw; add one of them"
        )
    loaded = checkpoint.load(args.checkpoint, pick_device(args.device))
    lines = args.sentences or [line for line in sys.stdin.read().splitlines() if line.strip()]
    if not lines:
        raise ValueError("nothing to translate: give sentences as arguments or on stdin")
    examples = [Example(tokenise(s, loaded.meta), []) for s in lines]
    for i, e in enumerate(examples):
        if not e.src:
            raise ValueError(f"sentence {i + 1} is empty")
        unknown = sorted({t for t in e.src if t not in loaded.src_vocab.index})
        if unknown:
            print(
                f"warning: sentence {i + 1} has tokens the model never saw in training "
                f"(read as <unk>): {' '.join(unknown)}",
                file=sys.stderr,
            )
    out = translate(
        loaded.model,
        examples,
        loaded.src_vocab,
        loaded.tgt_vocab,
        beam=args.beam,
        length_penalty=args.length_penalty,
    )
    from ..data.source import tokenisers_for

    detok = tokenisers_for(loaded.meta)[1].decode  # subwords are printed as detokenised text
    for e, hyp, w in zip(examples, out.hyps, out.weights, strict=True):
        print(detok(hyp))
        if args.show:
            print(_heatmap_text(args, loaded, e.src, hyp, w) + "\n")
    if args.save_attention:
        base = Path(args.save_attention)
        for i, (e, hyp, w) in enumerate(zip(examples, out.hyps, out.weights, strict=True)):
            path = base if i == 0 else base.with_name(f"{base.stem}-{i + 1}{base.suffix}")
            _draw(args, loaded, e.src, hyp, w, path)
            print(f"attention heatmap: {path}", file=sys.stderr)
    return 0


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
        head=head if isinstance(head, int) else None,
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
