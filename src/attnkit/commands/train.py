"""``attnkit train``: train a sequence-to-sequence model on a task or on corpus files."""

from __future__ import annotations

import argparse
from typing import Any

MODEL_OPTIONS = ("emb", "enc_hidden", "dec_hidden", "attn_hidden", "maxout", "dropout")


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        default="rnnsearch",
        help="rnnsearch | rnnencdec | luong | transformer (default rnnsearch)",
    )
    p.add_argument(
        "--opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any option of the model's config, e.g. --opt score=dot --opt align=local-p "
        "(repeatable; see docs/models.md)",
    )
    p.add_argument("--preset", default="small", help="named size preset (tiny, small, base, paper)")
    for name in MODEL_OPTIONS:
        p.add_argument(
            f"--{name.replace('_', '-')}",
            type=float if name == "dropout" else int,
            default=None,
            help=f"override the preset's {name}",
        )


def add_train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm (0 = off)")
    p.add_argument("--patience", type=int, default=3, help="early stopping patience (0 = off)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--save-every",
        type=int,
        default=50,
        help="write a resumable checkpoint every N steps (0 = at epoch ends)",
    )
    p.add_argument("--time-limit", type=float, default=0.0, help="stop after this many seconds")
    p.add_argument(
        "--target-exact",
        type=float,
        default=0.0,
        help="stop once valid exact match reaches this fraction (0 = never)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--sleep-per-step", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--device", default="cpu", help="auto | cpu | cuda (default cpu)")


def add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default=None, help="a built-in task: toy-ko")
    p.add_argument("--task-seed", type=int, default=0, help="seed of the generated data")
    p.add_argument("--train-size", type=int, default=None)
    p.add_argument("--valid-size", type=int, default=None)
    p.add_argument("--test-size", type=int, default=None)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train a sequence-to-sequence model (RNNsearch, ...)",
        description="Train a seq2seq model; writes OUT/best (lowest valid loss), "
        "OUT/last (resumable) and OUT/history.json.",
    )
    add_data_args(p)
    add_model_args(p)
    add_train_args(p)
    p.add_argument("--min-freq", type=int, default=1, help="vocabulary minimum frequency")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--resume", action="store_true", help="continue the run in OUT/last")
    p.set_defaults(run=run)


def pick_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"--device {name!r}; choose auto, cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda but torch sees no CUDA device; use --device cpu or auto")
    return name


def load_data(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    from ..data.tasks import load_task

    if args.task is None:
        raise ValueError("say what to train on: --task toy-ko")
    splits = load_task(
        args.task,
        seed=args.task_seed,
        train_size=args.train_size,
        valid_size=args.valid_size,
        test_size=args.test_size,
    )
    meta = {
        "task": args.task,
        "task_seed": args.task_seed,
        "train_size": args.train_size,
        "valid_size": args.valid_size,
        "test_size": args.test_size,
    }
    return splits, meta


def run(args: argparse.Namespace) -> int:
    import torch

    from ..data.vocab import Vocab
    from ..models import build_model, parse_options
    from ..train.loop import TrainConfig, train

    device = pick_device(args.device)
    cfg = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        clip=args.clip,
        patience=args.patience,
        seed=args.seed,
        save_every=args.save_every,
        time_limit=args.time_limit,
        target_exact=args.target_exact,
        progress=not args.no_progress,
        sleep_per_step=args.sleep_per_step,
    )
    splits, meta = load_data(args)
    src_vocab = Vocab.build((e.src for e in splits.train), args.min_freq)
    tgt_vocab = Vocab.build((e.tgt for e in splits.train), args.min_freq)
    torch.manual_seed(args.seed)
    overrides = {k: getattr(args, k) for k in MODEL_OPTIONS if getattr(args, k) is not None}
    overrides.update(parse_options(args.model, args.opt))
    model = build_model(
        args.model,
        preset=args.preset,
        src_vocab=len(src_vocab),
        tgt_vocab=len(tgt_vocab),
        **overrides,
    ).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"{args.model} ({n_params:,} parameters) on {len(splits.train)} training pairs; "
        f"vocab {len(src_vocab)} -> {len(tgt_vocab)}; device {device}"
    )
    result = train(
        model,
        args.model,
        splits.train,
        splits.valid,
        src_vocab,
        tgt_vocab,
        cfg,
        args.out,
        resume=args.resume,
        meta=meta,
    )
    print(
        f"stopped ({result.stopped}) after {result.epochs_run} epochs, {result.steps} steps, "
        f"{result.seconds:.0f}s; best valid loss {result.best_valid_loss:.4f}; "
        f"checkpoint in {args.out}/best"
    )
    return 0
