"""``attnkit view --hf PATH_OR_NAME "text"``: a Hugging Face model's attention on a text. The
page (--out) and the image (--png) show every layer and head (the model view; an
encoder-decoder's encoder, decoder and cross attention as sections); --head or --through show
one map of --kind instead, as a checkpoint's view does. The maps: ``attnkit.viz.hf_view``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

Through = Callable[[Any, "str | None", str], Any]


def from_hf(args: argparse.Namespace, head: int | str | None, through: Through) -> list[str]:
    """Run the model on the sentence and show its maps; returns the lines to print.
    ``through``: the view's rollout/flow step (record, how, what) -> record."""
    from ..viz.from_checkpoint import select_map
    from ..viz.hf_view import load_model, model_maps
    from ..viz.model_view import model_view_png, write_model_view
    from ..viz.outputs import show

    if not args.sentence:
        raise ValueError('--hf needs a text: attnkit view --hf DIR "the cat sat on the mat"')
    given = [flag for flag, value in (
        ("--src-tokens", args.src_tokens), ("--tgt-tokens", args.tgt_tokens),
        ("--tokens", args.tokens), ("--gold", args.gold), ("--example", args.example),
    ) if value is not None]  # fmt: skip
    if given:
        raise ValueError(f"{'/'.join(given)}: not with --hf, whose tokens are its tokenizer's")
    if args.through is not None and head is not None:
        raise ValueError("--through averages the heads of every layer: leave out --head")
    single = head is not None or args.through is not None
    if args.model_view and single:
        raise ValueError("--model-view shows every layer and head: leave out --head/--through")
    tokenizer, model = load_model(args.hf)
    got = model_maps(model, tokenizer, args.sentence, target=args.target,
                     max_new_tokens=args.max_new_tokens, max_input_len=args.max_input_len,
                     truncate=args.truncate)  # fmt: skip
    if got.cut:
        print(f"warning: the text was cut by {got.cut} token(s) (--truncate)", file=sys.stderr)
    lines = [] if got.output is None else [f"output: {got.output}"]
    maps, title = got.maps, args.title or f"{args.hf}: {args.sentence}"
    kind = args.kind or ("cross" if "cross" in maps else next(iter(maps)))
    record = select_map(maps, kind, str(args.hf), layer=args.layer, head=head)
    if not single and (args.out or args.png):
        if args.out:
            lines.append(f"wrote {write_model_view(args.out, maps, title=title)}")
        if args.png:
            lines.append(f"wrote {model_view_png(args.png, maps, title=title)}")
        if args.terminal:
            lines += show(record.weights, record.tgt_tokens or [], record.src_tokens,
                          terminal=True, layer=args.layer, title=f"{title} [{kind}]")  # fmt: skip
        return lines
    combined = through(record, args.through, f"the {kind} attention")
    others = {k: r for k, r in maps.items() if k != kind} if args.through is None else None
    lines += show(
        combined.weights,
        combined.tgt_tokens or [],
        combined.src_tokens,
        page_path=args.out,
        png_path=args.png,
        terminal=args.terminal or not (args.out or args.png),
        layer=args.layer if args.through is None else -1,
        heads=head,
        title=f"{title} [{kind}{'' if args.through is None else ', ' + args.through}]",
        name=kind,
        more=others,
    )
    return lines
