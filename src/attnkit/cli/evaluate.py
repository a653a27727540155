"""``attnkit evaluate``: BLEU, chrF and exact match of a checkpoint on a task's split."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("evaluate", help="score a checkpoint: BLEU, chrF, exact match")
    p.add_argument("--checkpoint", required=True, help="a checkpoint or `attnkit train` folder")
    p.add_argument(
        "--task",
        default=None,
        help="task to score on (default: the one the checkpoint was trained on)",
    )
    p.add_argument(
        "--task-seed",
        type=int,
        default=None,
        help="seed of the generated task (default: the checkpoint's)",
    )
    g = p.add_argument_group(
        "corpus files (a model trained on files: name the same files; evaluate reads no path "
        "stored in a checkpoint, and checks each file's sha256 against the one recorded)"
    )
    for key in ("train_tsv", "train_src", "train_tgt", "valid_src", "valid_tgt", "test_src",
                "test_tgt", "docs_csv", "train_text", "valid_text"):  # fmt: skip
        flag = "--" + key.replace("_", "-")
        g.add_argument(flag, default=None, metavar="FILE", help=f"{flag} of the training run")
    p.add_argument("--split", default="test", help="train | valid | test")
    p.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy)")
    p.add_argument(
        "--length-penalty", type=float, default=1.0, help="beam score = log p / length^alpha"
    )
    p.add_argument("--limit", type=int, default=0, help="score only the first N examples")
    p.add_argument(
        "--alignments",
        nargs="?",
        const="",
        default=None,
        metavar="PHARAOH_FILE",
        help="also score the attention as word alignment: AER (Och & Ney 2003) of argmax and "
        "of thresholded links, and entropy. The REFERENCE is force-decoded (teacher forcing, as "
        "Luong 2015 §5.4) since hypotheses differ from it. Gold: the task's links, or a file "
        "with one line of 0-based src-tgt links ('0-0 2-1') per evaluated sentence",
    )
    p.add_argument(
        "--align-threshold",
        type=float,
        default=0.5,
        help="weight from which a link counts in the thresholded AER",
    )
    f = p.add_argument_group(
        "any test set: translate a source file and score it against reference files with "
        "sacreBLEU (signature printed), chrF and the length ratio"
    )
    f.add_argument("--src", default=None, metavar="FILE", help="source sentences, one a line")
    f.add_argument(
        "--ref",
        action="append",
        default=None,
        metavar="FILE",
        help="references, line-aligned with --src (repeat for several references)",
    )
    f.add_argument("--hyps", default=None, metavar="FILE", help="also write the translations")
    f.add_argument(
        "--tokenize", default="13a", help="sacreBLEU's tokeniser (13a, intl, char, ko-mecab...)"
    )
    f.add_argument("--batch-size", type=int, default=64, help="sentences decoded together")
    f.add_argument(
        "--max-input-len", type=int, default=1000, help="longest source line, in tokens"
    )
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..data.source import FILE_KEYS, load_spec, spec_from_files, tokenisers_for
    from ..decode import translate
    from ..eval.forced import attention_aer
    from ..eval.text import score
    from ..tasks.registry import family, model_family
    from ..train import checkpoint
    from ..train.runtime import pick_device

    if args.limit < 0 or args.beam < 1:
        raise ValueError(f"--limit {args.limit} --beam {args.beam}: need --limit >= 0 (0 = all) "
                         "and --beam >= 1")  # fmt: skip
    if args.split not in ("train", "valid", "test"):
        raise ValueError(f"--split {args.split!r}; choose train, valid or test")
    refuse_output_over_input(args)
    loaded = checkpoint.load(args.checkpoint, pick_device(args.device))
    if args.src is not None or args.ref is not None:
        return _score_files(args, loaded)
    meta = loaded.meta
    if args.task and args.task != meta.get("task"):
        spec = {"task": args.task, "task_seed": args.task_seed or 0}
    else:
        spec = spec_from_files(meta, {k: getattr(args, k) for k in FILE_KEYS})
        if args.task_seed is not None:
            spec["task_seed"] = args.task_seed
    if not spec.get("task") and not spec.get("train_tsv") and not spec.get("train_src"):
        raise ValueError("the checkpoint names no data; pass --task toy-ko")
    examples = load_spec(spec).get(args.split)
    task = spec.get("task") or spec.get("train_tsv") or spec.get("train_src")
    if args.limit:
        examples = examples[: args.limit]
    fam = family(model_family(loaded.model_name))
    if not fam.translates:
        return _family_scores(args, loaded, fam, examples, f"{task} {args.split}")
    out = translate(
        loaded.model,
        examples,
        loaded.src_vocab,
        loaded.tgt_vocab,
        beam=args.beam,
        length_penalty=args.length_penalty,
    )
    tgt_tok = tokenisers_for(spec)[1]
    detok = tgt_tok.decode if tgt_tok.name == "spm" else None
    s = score(out.hyps, examples, join="" if tgt_tok.name == "char" else " ", detok=detok)
    aer = attention_aer(loaded.model, examples, loaded.src_vocab, loaded.tgt_vocab)
    align = None
    if args.alignments is not None:
        from ..eval.forced import alignment_report, format_report

        align = alignment_report(loaded, examples, args.alignments, args.align_threshold)
    if args.json:
        extra = {} if align is None else {"alignment": align.to_json()}
        print(json.dumps({**asdict(s), "aer": aer, **extra}, indent=1))
        return 0
    print(
        f"{task} {args.split}: {s.n} sentences, "
        f"{'greedy' if args.beam == 1 else f'beam {args.beam}'}"
    )
    print(f"  exact match {100 * s.exact_match:.1f}%   BLEU {s.bleu:.1f}   chrF {s.chrf:.1f}")
    from ..models.softness import softness_of

    softness = softness_of(loaded.model)
    if softness.at_test is not None:  # which alignment the decoder read (models/softness.py)
        print(f"  {softness.name} attention: the output reads {softness.at_test}")
    if detok is not None:
        print("  (sacreBLEU: detokenised output against the raw references, 13a tokenisation)")
    if aer is not None:
        print(f"  attention AER {100 * aer:.1f}% (argmax attention on the reference vs gold links)")
    print("  by source length:")
    for row in s.by_length:
        print(
            f"    {row['src_len']:>7} tokens n={row['n']:<5} BLEU {row['bleu']:5.1f}  "
            f"exact {100 * float(row['exact_match']):5.1f}%"
        )
    if align is not None:
        print("\n".join(format_report(align)))
    return 0


def refuse_output_over_input(args: argparse.Namespace) -> None:
    """Refuse a ``--hyps`` that is one of the command's inputs (the same file after resolving
    links, or a file of the checkpoint), before anything is read or written."""
    import os
    from pathlib import Path

    from ..data.source import FILE_KEYS

    if not args.hyps or not os.path.exists(args.hyps):
        return  # a new file cannot be an input
    inputs = [("--src", args.src), *(("--ref", r) for r in args.ref or ()),
              ("--alignments", args.alignments or None),
              *((f"--{k.replace('_', '-')}", getattr(args, k)) for k in FILE_KEYS)]  # fmt: skip
    for flag, path in inputs:
        if path and os.path.exists(path) and os.path.samefile(args.hyps, path):
            raise ValueError(
                f"--hyps {args.hyps} is the same file as {flag} {path}; writing the "
                "translations there would overwrite it: pick another --hyps"
            )
    if Path(args.hyps).resolve().is_relative_to(Path(args.checkpoint).resolve()):
        raise ValueError(
            f"--hyps {args.hyps} is inside --checkpoint {args.checkpoint}; writing the "
            "translations there would damage it: pick another --hyps"
        )


def _family_scores(
    args: argparse.Namespace, loaded: Any, fam: Any, examples: list[Any], what: str
) -> int:
    """The metrics of a model that does not translate (its family's ``evaluate``)."""
    if fam.evaluate is None:
        raise ValueError(f"{fam.name} models have no evaluation")
    if args.beam != 1 or args.alignments is not None:
        raise ValueError(f"--beam and --alignments score translations, not {fam.name} models")
    scores = fam.evaluate(loaded, examples)
    if args.json:
        print(json.dumps({"n": len(examples), **scores}, indent=1))
        return 0
    print(f"{what}: {len(examples)} examples ({loaded.model_name}, a {fam.name} model)")
    for key, value in scores.items():
        print(f"  {key} {value:.4g}")
    return 0


def _score_files(args: argparse.Namespace, loaded: Any) -> int:
    """``--src FILE --ref FILE...``: sacreBLEU, chrF and length ratio on any file pair."""
    from pathlib import Path

    from ..data.source import FILE_KEYS
    from ..eval.files import score_files
    from ..tasks.registry import family, model_family

    if args.src is None or not args.ref:
        raise ValueError("--src FILE and --ref FILE go together: name the sources and references")
    others = [f"--{k.replace('_', '-')}" for k in ("task", *FILE_KEYS) if getattr(args, k)]
    if args.alignments is not None:
        others.append("--alignments")
    if args.limit or args.split != "test":
        others.append("--limit/--split")
    if others:
        raise ValueError(f"{', '.join(others)} score a task's split; --src/--ref score the files")
    if not family(model_family(loaded.model_name)).translates:
        raise ValueError(f"{loaded.model_name} does not translate: --src/--ref score translations")
    s = score_files(
        loaded,
        args.src,
        args.ref,
        beam=args.beam,
        length_penalty=args.length_penalty,
        batch_size=args.batch_size,
        max_input_len=args.max_input_len,
        tokenize=args.tokenize,
    )
    if args.hyps:
        Path(args.hyps).write_text("".join(h + "\n" for h in s.hyps), encoding="utf-8")
    if args.json:
        print(json.dumps(s.to_json(), indent=1))
        return 0
    refs = ", ".join(args.ref)
    print(f"{args.src} -> {refs}: {s.n} sentences, "
          f"{'greedy' if args.beam == 1 else f'beam {args.beam}'}")  # fmt: skip
    print(f"  BLEU {s.bleu:.1f}   ({s.bleu_signature})")
    print(f"  chrF {s.chrf:.1f}   ({s.chrf_signature})")
    print(f"  length ratio {s.length_ratio:.3f} (hypothesis / reference length)")
    return 0
