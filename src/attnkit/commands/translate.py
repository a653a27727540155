"""``attnkit translate``: translate sentences with a trained checkpoint."""

from __future__ import annotations

import argparse
import sys
from typing import Any


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
    p.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..data.example import Example
    from ..data.source import tokenise_source as tokenise
    from ..decode import translate
    from ..train import checkpoint
    from ..train.runtime import pick_device
    from ..viz import heatmap

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
            from ..viz.from_checkpoint import translation_heatmap

            print(translation_heatmap(e.src, hyp, w, loaded.src_vocab) + "\n")
    if args.save_attention:
        base = Path(args.save_attention)
        for i, (e, hyp, w) in enumerate(zip(examples, out.hyps, out.weights, strict=True)):
            if w is None:
                raise ValueError(f"{loaded.model_name} has no attention to draw")
            path = base if i == 0 else base.with_name(f"{base.stem}-{i + 1}{base.suffix}")

            def shown(t: str) -> str:
                return "_" if t == " " else t

            src = [shown(t) if t in loaded.src_vocab.index else f"{t}(unk)" for t in e.src]
            tgt = [shown(t) for t in hyp]
            heatmap(w, [*tgt, "<eos>"][: w.shape[0]], [*src, "<eos>"], path=path)
            print(f"attention heatmap: {path}", file=sys.stderr)
    return 0
