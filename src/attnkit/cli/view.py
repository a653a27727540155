"""``attnkit view``: look at attention weights that you saved, or at a checkpoint's attention
on a sentence — an interactive HTML page, a PNG heatmap, or a heatmap in the terminal.

    attnkit view --weights attn.safetensors --src-tokens "I go to school ." \
        --tgt-tokens "나는 학교에 간다 ." --out attn.html --png attn.png
    attnkit view --checkpoint runs/rs "I am a student" --out attn.html
    attnkit view --checkpoint runs/tf "I am a student" --kind enc-self --layer 0 --png enc.png
    attnkit view --hf runs/my-bert "the cat sat on the mat" --out model.html --png model.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .._text import on_terminal

# the kinds of attention a checkpoint may offer (attnkit.viz.from_checkpoint.KINDS; kept here
# so that building the parser imports no torch)
KINDS = ("enc-self", "dec-self", "cross")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "view",
        help="show saved attention weights: HTML page, PNG heatmap, terminal heatmap",
        description=(
            "Weights come from a safetensors file with a 'weights' tensor of shape (Tq, Tk), "
            "(H, Tq, Tk) or (L, H, Tq, Tk): rows are target (query) tokens, columns source "
            "(key) tokens. Tokens come from --src-tokens/--tgt-tokens (split on spaces), a "
            '--tokens JSON file {"src": [...], "tgt": [...]}, or the file\'s metadata '
            "(attnkit.viz.save_attention writes it). No source tokens, or a file whose source "
            "tokens are its target tokens (a Hugging Face model's saved self-attention) = "
            "self-attention. "
            "Or --checkpoint DIR 'sentence': translate it greedily and show the attention: "
            "the page holds every kind the model has (a Transformer: encoder self-attention, "
            "decoder self-attention and cross-attention, per layer and head, behind a switch); "
            "--kind/--layer/--head pick the one for the PNG and the terminal."
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--weights", help="safetensors file")
    src.add_argument("--checkpoint", help="a checkpoint or `attnkit train` folder")
    src.add_argument(
        "--hf",
        metavar="PATH_OR_NAME",
        help="a Hugging Face model and tokenizer: a folder saved with save_pretrained "
        "(safetensors weights), or a hub name where the network works; runs the sentence "
        "through it and shows every layer and head (--out page, --png grid); --head or "
        "--through show one map of --kind",
    )
    p.add_argument(
        "sentence",
        nargs="?",
        help="with --checkpoint: the sentence to translate; with --hf: the text to run",
    )
    p.add_argument(
        "--target",
        default=None,
        help="with --hf of an encoder-decoder (T5, BART): the decoder's text, teacher-forced "
        "(default: the model's own greedy output)",
    )
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=40,
        help="with --hf of an encoder-decoder and no --target: the most tokens to generate",
    )
    p.add_argument(
        "--max-input-len",
        type=int,
        default=1000,
        help="with --checkpoint or --hf: longest sentence in tokens; a longer one is an error, "
        "or is cut with --truncate",
    )
    p.add_argument(
        "--truncate",
        action="store_true",
        help="with --checkpoint or --hf: cut a sentence over --max-input-len",
    )
    p.add_argument("--name", default="weights", help="tensor name in the file")
    p.add_argument("--src-tokens", help="source (key) tokens, separated by spaces")
    p.add_argument("--tgt-tokens", help="target (query) tokens, separated by spaces")
    p.add_argument("--tokens", help='JSON file {"src": [...], "tgt": [...]}')
    p.add_argument("--out", help="write the interactive page here (.html)")
    p.add_argument("--png", help="write a heatmap image here (.png, .svg or .pdf)")
    p.add_argument("--terminal", action="store_true", help="print a heatmap (the default)")
    p.add_argument(
        "--kind",
        choices=KINDS,
        default=None,
        help="with --checkpoint: which attention the PNG and terminal show, and the page opens "
        "on (default cross; enc-self and dec-self need a model that has them: the Transformer)",
    )
    p.add_argument("--layer", type=int, default=-1, help="layer of stacked weights (-1 = the last)")
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
    p.add_argument(
        "--model-view",
        action="store_true",
        help="every layer x head at once: the page (--out) is a grid of small maps that open "
        "large on a click, the image (--png) one grid (bertviz's model view)",
    )
    p.add_argument(
        "--through",
        choices=("rollout", "flow"),
        default=None,
        help="show how much each token reaches each position through every layer of stacked "
        "self-attention (Abnar & Zuidema 2020): attention rollout, or attention flow "
        "(max-flow; meant for sentence lengths)",
    )
    p.add_argument(
        "--example",
        type=int,
        default=None,
        help="with --checkpoint of a model that does not translate (captions, labels, "
        "forecasts): show its attention on example N of --split (default 0)",
    )
    p.add_argument("--split", default="test", help="with --example: train | valid | test")
    p.add_argument(
        "--docs-csv",
        default=None,
        metavar="FILE",
        help="with --example: the documents file the model was trained on (checked by sha256)",
    )
    for flag in ("--train-text", "--valid-text"):
        p.add_argument(flag, default=None, metavar="FILE",
                       help=f"with --example: the {flag} the language model was trained on")
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


def _parse_head(head: str | None) -> int | str | None:
    if head in (None, "mean"):
        return head
    try:
        return int(head)
    except ValueError as err:
        raise ValueError(f"--head {head!r}: pass a head index or 'mean'") from err


def _from_family(args: argparse.Namespace, loaded: Any, name: str) -> list[str]:
    """A model of another family than translation: its family draws example --example of
    --split (regenerated from the checkpoint's task) with its attention."""
    from ..data.source import FILE_KEYS, load_spec, spec_from_files
    from ..tasks.registry import family

    fam = family(name)
    if fam.show is None:
        raise ValueError(f"{name} models have no attention view")
    if args.sentence:
        raise ValueError(
            f"{loaded.model_name} is a {name} model: it reads no sentence; pick an example "
            "of its task with --example N [--split test]"
        )
    if not loaded.meta.get("task"):
        raise ValueError(f"the checkpoint names no generated task to draw examples of {name}")
    given = {k: getattr(args, k, None) for k in FILE_KEYS}  # files are named, never read from meta
    examples = load_spec(spec_from_files(loaded.meta, given)).get(args.split)
    index = args.example or 0
    if not 0 <= index < len(examples):
        raise ValueError(
            f"--example {index}: the {args.split} split has {len(examples)} examples "
            f"(0..{len(examples) - 1})"
        )
    return fam.show(loaded, examples, index, args.out, args.png)


def _bounded(src: list[str], limit: int, truncate: bool) -> list[str]:
    """The sentence's tokens within --max-input-len (as translate's): a longer sentence would
    take minutes and gigabytes; it is an error, or cut with --truncate and a warning."""
    if limit < 1:
        raise ValueError(f"--max-input-len {limit}: it must be at least 1")
    if len(src) <= limit:
        return src
    if not truncate:
        raise ValueError(
            f"the sentence has {len(src):,} tokens, over --max-input-len {limit}: "
            "split it, raise --max-input-len, or pass --truncate"
        )
    print(f"warning: the sentence was cut to {limit} of {len(src):,} tokens", file=sys.stderr)
    return src[:limit]


def _from_checkpoint(args: argparse.Namespace, head: int | str | None) -> list[str]:
    """Translate the sentence; the page gets every kind of attention the model has (opening
    on --kind), the PNG and the terminal the --kind one. A model of another family (see
    tasks/family.py) shows an example of its task instead."""
    from ..data.source import tokenise_source as tokenise
    from ..data.source import tokenisers_for
    from ..eval.alignment import parse_pharaoh
    from ..tasks.registry import family, model_family
    from ..train import checkpoint
    from ..viz.from_checkpoint import select_map, sentence_maps
    from ..viz.outputs import show

    loaded = checkpoint.load(args.checkpoint)
    name = model_family(loaded.model_name)
    if not family(name).translates:
        return _from_family(args, loaded, name)
    if args.example is not None:
        raise ValueError("--example goes with models that do not translate; pass a sentence")
    if not args.sentence:
        raise ValueError(
            '--checkpoint needs a sentence: attnkit view --checkpoint DIR "I am a student"'
        )
    given = [f for f, v in (("--src-tokens", args.src_tokens), ("--tgt-tokens", args.tgt_tokens),
                            ("--tokens", args.tokens)) if v]  # fmt: skip
    if given:
        raise ValueError(
            f"{'/'.join(given)} go with --weights FILE; a checkpoint's tokens are the sentence "
            "and its translation"
        )
    kind = args.kind or "cross"
    if args.gold and kind != "cross":
        raise ValueError(
            f"--gold links source words to target words: it goes with --kind cross, not {kind}"
        )
    tokens = tokenise(args.sentence, loaded.meta)
    src = _bounded(tokens, args.max_input_len, args.truncate)
    hyp, maps = sentence_maps(loaded, src)
    if args.model_view:
        print(on_terminal(f"translation: {tokenisers_for(loaded.meta)[1].decode(hyp)}"))
        title = args.title or f"{loaded.model_name}: {args.sentence}"
        return _model_view(args, maps, None, None, title)
    record = select_map(maps, kind, loaded.model_name, layer=args.layer, head=head)
    record = _through(record, args.through, f"the {kind} attention")
    print(on_terminal(f"translation: {tokenisers_for(loaded.meta)[1].decode(hyp)}"))
    shown = args.sentence if src is tokens else " ".join(src) + " …"
    title = args.title or f"{loaded.model_name}: {shown}"
    gold = parse_pharaoh(args.gold) if args.gold else None
    lines: list[str] = []
    if args.out:
        cross = maps["cross"]
        others = {k: r for k, r in maps.items() if k != "cross"}
        lines += show(cross.weights, cross.tgt_tokens or [], cross.src_tokens, page_path=args.out,
                      gold=gold, title=title, name="cross", more=others, shown=kind)  # fmt: skip
    picked = title if kind == "cross" else f"{title} [{kind}]"
    lines += show(
        record.weights,
        record.tgt_tokens or [],
        record.src_tokens,
        png_path=args.png,
        terminal=args.terminal or not (args.out or args.png),
        layer=args.layer,
        heads=head,
        gold=gold,
        title=picked,
    )
    return lines


def _through(record: Any, how: str | None, what: str) -> Any:
    """The record with its stacked self-attention replaced by the rollout or flow to its
    last layer, one (T, T) map; the record as it is when ``how`` is None."""
    if how is None:
        return record
    from dataclasses import replace

    from .._checks import as_stack
    from ..viz.rollout import attention_flow, attention_rollout

    stack = as_stack(record.weights)  # (L, H, Tq, Tk)
    if stack.shape[-1] != stack.shape[-2] or record.src_tokens not in (None, record.tgt_tokens):
        raise ValueError(
            f"--through {how} follows self-attention through its layers; {what} is "
            "cross-attention (pick --kind enc-self or dec-self, or a self-attention file)"
        )
    combined = attention_rollout(stack)[-1] if how == "rollout" else attention_flow(stack)
    return replace(record, weights=combined.float())  # (T, T)


def _model_view(
    args: argparse.Namespace, weights: Any, tgt: Any, src: Any, title: str
) -> list[str]:
    """--model-view: every layer and head of ``weights`` (one map, or name -> record)."""
    from ..viz.model_view import model_view_png, write_model_view

    if args.through:
        raise ValueError("--through combines the layers into one map; leave out --model-view")
    if not (args.out or args.png):
        raise ValueError(
            "--model-view writes a page or an image: pass --out FILE.html or --png FILE"
        )
    lines = []
    if args.out:
        lines.append(f"wrote {write_model_view(args.out, weights, tgt, src, title=title)}")
    if args.png:
        lines.append(f"wrote {model_view_png(args.png, weights, tgt, src, title=title)}")
    return lines


def run(args: argparse.Namespace) -> int:
    from ..eval.alignment import parse_pharaoh
    from ..viz.outputs import show
    from ..viz.weights_file import load_attention

    head = _parse_head(args.head)
    if args.hf:  # tokens come from the model's tokenizer: escaped on a terminal
        from .view_hf import from_hf

        print("\n".join(on_terminal(line) for line in from_hf(args, head, _through)))
        return 0
    if args.checkpoint:  # tokens and labels come from data: escaped on a terminal
        print("\n".join(on_terminal(line) for line in _from_checkpoint(args, head)))
        return 0
    if args.sentence is not None:
        raise ValueError("a sentence goes with --checkpoint DIR; --weights files carry weights")
    if args.kind is not None:
        raise ValueError(
            "--kind goes with --checkpoint DIR; a --weights file holds one map (pick another "
            "tensor with --name)"
        )
    record = load_attention(args.weights, name=args.name)
    tgt, src = _resolve_tokens(args, record)
    if args.model_view:
        title = args.title or Path(args.weights).stem
        print("\n".join(_model_view(args, record.weights, tgt, src, title)))
        return 0
    record = _through(record, args.through, f"{args.weights} ({args.name})")
    lines = show(
        record.weights,
        tgt,
        src,
        page_path=args.out,
        png_path=args.png,
        terminal=args.terminal or not (args.out or args.png),
        layer=args.layer,
        heads=head,
        gold=parse_pharaoh(args.gold) if args.gold else None,
        title=args.title or Path(args.weights).stem,
    )
    print("\n".join(lines))
    return 0
