"""``attnkit view``: look at attention weights that you saved, or at a checkpoint's attention
on a sentence — an interactive HTML page, a PNG heatmap, or a heatmap in the terminal.

    attnkit view --weights attn.safetensors --src-tokens "I go to school ." \
        --tgt-tokens "나는 학교에 간다 ." --out attn.html --png attn.png
    attnkit view --checkpoint runs/rs "I am a student" --out attn.html
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "view",
        help="show saved attention weights: HTML page, PNG heatmap, terminal heatmap",
        description=(
            "Weights come from a safetensors file with a 'weights' tensor of shape (Tq, Tk), "
            "(H, Tq, Tk) or (L, H, Tq, Tk): rows are target (query) tokens, columns source "
            "(key) tokens. Tokens come from --src-tokens/--tgt-tokens (split on spaces), a "
            '--tokens JSON file {"src": [...], "tgt": [...]}, or the file\'s metadata '
            "(attnkit.viz.save_attention writes it). No source tokens = self-attention. "
            "Or --checkpoint DIR 'sentence': translate it greedily and show the attention "
            "(every layer and head where the model offers them)."
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--weights", help="safetensors file")
    src.add_argument("--checkpoint", help="a checkpoint or `attnkit train` folder")
    p.add_argument("sentence", nargs="?", help="with --checkpoint: the sentence to translate")
    p.add_argument("--name", default="weights", help="tensor name in the file (default weights)")
    p.add_argument("--src-tokens", help="source (key) tokens, separated by spaces")
    p.add_argument("--tgt-tokens", help="target (query) tokens, separated by spaces")
    p.add_argument("--tokens", help='JSON file {"src": [...], "tgt": [...]}')
    p.add_argument("--out", help="write the interactive page here (.html)")
    p.add_argument("--png", help="write a heatmap image here (.png, .svg or .pdf)")
    p.add_argument("--terminal", action="store_true", help="print a heatmap (the default)")
    p.add_argument("--layer", type=int, default=-1, help="layer of stacked weights (default last)")
    p.add_argument(
        "--head",
        default=None,
        help="head index or 'mean' (default: the PNG shows every head, the terminal the mean)",
    )
    p.add_argument(
        "--gold",
        help="gold alignment, Pharaoh format '0-0 1-2 2?3' (src-tgt): boxed in PNG and page",
    )
    p.add_argument("--title", default=None, help="page and figure title")
    p.set_defaults(run=run)


def _split(text: str | None) -> list[str] | None:
    return None if text is None else text.split()


def _resolve_tokens(args: argparse.Namespace, record: Any) -> tuple[list[str], list[str] | None]:
    src, tgt = record.src_tokens, record.tgt_tokens
    if args.tokens:
        path = Path(args.tokens)
        if not path.exists():
            raise FileNotFoundError(f"no tokens file {path}")
        spec = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(spec, dict) or "tgt" not in spec:
            raise ValueError(f'{path} must be a JSON object {{"src": [...], "tgt": [...]}}')
        src, tgt = spec.get("src"), spec["tgt"]
        for key, tokens in (("src", src), ("tgt", tgt)):
            ok = isinstance(tokens, list) and all(isinstance(t, str) for t in tokens)
            if not (ok or (key == "src" and tokens is None)):
                raise ValueError(f'{path}: "{key}" must be a list of token strings')
    src = _split(args.src_tokens) or src
    tgt = _split(args.tgt_tokens) or tgt
    if tgt is None:
        raise ValueError("no target tokens: pass --tgt-tokens 'a b c' or --tokens FILE.json")
    return tgt, src


def _from_checkpoint(args: argparse.Namespace) -> tuple[Any, str]:
    from ..data.source import tokenise_source as tokenise
    from ..data.source import tokenisers_for
    from ..train import checkpoint
    from ..viz.from_checkpoint import sentence_attention

    if not args.sentence:
        raise ValueError(
            '--checkpoint needs a sentence: attnkit view --checkpoint DIR "I am a student"'
        )
    loaded = checkpoint.load(args.checkpoint)
    hyp, record = sentence_attention(loaded, tokenise(args.sentence, loaded.meta))
    print(f"translation: {tokenisers_for(loaded.meta)[1].decode(hyp)}")
    return record, f"{loaded.model_name}: {args.sentence}"


def run(args: argparse.Namespace) -> int:
    from ..eval.alignment import parse_pharaoh
    from ..viz.outputs import show
    from ..viz.weights_file import load_attention

    if args.checkpoint:
        record, title = _from_checkpoint(args)
    elif args.sentence is not None:
        raise ValueError("a sentence goes with --checkpoint DIR; --weights files carry weights")
    else:
        record, title = load_attention(args.weights, name=args.name), Path(args.weights).stem
    tgt, src = _resolve_tokens(args, record)
    head: int | str | None = args.head
    if head not in (None, "mean"):
        try:
            head = int(head)
        except ValueError as err:
            raise ValueError(f"--head {head!r}: pass a head index or 'mean'") from err
    lines = show(
        record.weights,
        tgt,
        src,
        out=args.out,
        png=args.png,
        terminal=args.terminal or not (args.out or args.png),
        layer=args.layer,
        head=head,
        gold=parse_pharaoh(args.gold) if args.gold else None,
        title=args.title or title,
    )
    print("\n".join(lines))
    return 0
