"""``attnkit train``: train a sequence-to-sequence model on a task or on corpus files."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from .._registry import Registry


@dataclass(frozen=True)
class ModelOption:
    """A model flag: ``--{name}`` (underscores as dashes) sets config field ``name``, parsed as
    ``type``; it applies to the models whose config has that field, as ``help`` says."""

    name: str
    type: type
    help: str


MODEL_OPTIONS: Registry[ModelOption] = Registry("model option")
"""The model flags, in the order ``attnkit train --help`` shows them."""
# fmt: off
for _option in (
    ModelOption("emb", int, "embedding width"),
    ModelOption("enc_hidden", int, "rnnsearch/rnnencdec: encoder width"),
    ModelOption("dec_hidden", int, "rnnsearch/rnnencdec: decoder width"),
    ModelOption("attn_hidden", int, "rnnsearch: additive score width"),
    ModelOption("maxout", int, "rnnsearch/rnnencdec: deep output"),
    ModelOption("context", int, "rnnencdec: width of the summary vector c"),
    ModelOption("hidden", int, "luong: LSTM/GRU width"),
    ModelOption("layers", int, "luong: stacked layers"),
    ModelOption("cell", str, "luong: lstm | gru"),
    ModelOption("score", str, "luong: dot | general | concat | location"),
    ModelOption("align", str, "luong: global | local-m | local-p"),
    ModelOption("window", int, "luong: local window D"),
    ModelOption("max_src_len", int, "luong, location score: longest source (rows of W_a)"),
    ModelOption("dim", int, "transformer: model width"),
    ModelOption("heads", int, "transformer: attention heads"),
    ModelOption("kv_heads", int,
                "transformer, transformer-lm, transformer-xl: key/value heads, each shared by "
                "heads / kv_heads query heads (grouped-query, Ainslie 2023; 1: multi-query, "
                "Shazeer 2019; default: heads, multi-head)"),
    ModelOption("ff", int, "transformer: feed-forward width"),
    ModelOption("enc_layers", int, "transformer: encoder layers"),
    ModelOption("dec_layers", int, "transformer: decoder layers"),
    ModelOption("norm", str, "transformer: post (the paper) | pre"),
    ModelOption("share", str, "transformer: none | output | all (embedding sharing)"),
    ModelOption("position", str,
                "transformer: sinusoidal (the paper's, default) | learned | shaw | t5 | alibi | "
                "rope | xl (docs/position.md)"),
    ModelOption("rope_scaling", str,
                "transformer-lm, --position rope: none (default) | linear (position "
                "interpolation, Chen 2023) | ntk (NTK-aware) | yarn (Peng 2023): RoPE trained at "
                "--opt max_len positions stretched by --rope-factor (docs/linear.md)"),
    ModelOption("rope_factor", float,
                "transformer-lm, --rope-scaling: the context extension s >= 1 (default 1)"),
    ModelOption("dropout", float, "dropout probability"),
    ModelOption("softness", str,
                "rnnsearch/luong: soft (default) | mean | exact | hard | gumbel | variational "
                "(docs/softness.md; exact trains on the marginal over the alignment by "
                "enumeration; at test hard and gumbel take the argmax, exact and variational the "
                "marginal under the prior p)"),
    ModelOption("estimator", str,
                "variational: enumerate (exact, default) | sample (REINFORCE + baseline)"),
    ModelOption("tau_start", float, "gumbel: temperature at the first update (default 1.0)"),
    ModelOption("tau_end", float, "gumbel: temperature after --tau-steps updates (default 0.5)"),
    ModelOption("tau_steps", int,
                "gumbel: updates over which the temperature is annealed (default 1000)"),
    ModelOption("entropy_weight", float, "hard: weight of the entropy bonus (default 0.01)"),
    ModelOption("reward_baseline", str,
                "hard, variational sample: REINFORCE baseline, average (moving average, Xu 2015; "
                "default) | soft (log-likelihood of the soft context, Deng 2018)"),
    ModelOption("decoder", str,
                "rnnsearch/luong: context (the soft context feeds the recurrence; default) | "
                "deng (Deng et al. 2018: no context in the recurrence, the alignment alone "
                "carries the source; luong: with --no-input-feeding)"),
    ModelOption("memory", int,
                "transformer-xl: memory length, hidden states kept per layer from the previous "
                "segments (Dai 2019, §3.2; default: the preset's)"),
):
    MODEL_OPTIONS.register(_option)
# fmt: on


def add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (flags override the preset; each applies where it fits)")
    g.add_argument(
        "--model",
        default=None,
        help="rnnsearch (the default for translation) | rnnencdec | luong | transformer; other "
        "tasks' models (the default for their task): captioner | forecaster | han | digit-qa | "
        "transformer-xl (language modelling, --task lm) | transformer-lm",
    )
    g.add_argument("--preset", default="small", help="tiny | small | base | paper")
    for option in MODEL_OPTIONS.values():
        g.add_argument(
            f"--{option.name.replace('_', '-')}", type=option.type, default=None, help=option.help
        )
    g.add_argument(
        "--no-input-feeding",
        dest="input_feeding",
        action="store_false",
        default=None,
        help="luong: do not feed h̃_t to the next step",
    )
    g.add_argument(
        "--opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any option of the model's config, e.g. --opt share=none (repeatable)",
    )


def model_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The model flags given on the command line, then ``--opt KEY=VALUE`` pairs."""
    from dataclasses import fields

    from ..models import MODELS, parse_options

    known = {f.name for f in fields(MODELS[args.model].config)}
    given = {k: getattr(args, k, None) for k in [*MODEL_OPTIONS, "input_feeding"]}
    given = {k: v for k, v in given.items() if v is not None}
    wrong = sorted(set(given) - known)
    if wrong:
        flags = ", ".join("--" + k.replace("_", "-") for k in wrong)
        raise ValueError(f"{flags} do(es) not apply to --model {args.model}")
    return {**given, **parse_options(args.model, args.opt)}


def add_train_args(p: argparse.ArgumentParser) -> None:
    from ..train.config import LR_DECAYS

    p.add_argument("--epochs", type=int, default=20, help="most passes over the training data")
    p.add_argument("--batch-size", type=int, default=64, help="examples per update")
    p.add_argument(
        "--lr", type=float, default=2e-3, help="Adam learning rate (the peak with --warmup)"
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="steps of linear learning-rate warm-up, then decay as 1/sqrt(step) (Vaswani "
        "2017, §5.3, with --lr as the peak); 0 = constant --lr",
    )
    p.add_argument(
        "--lr-decay",
        choices=LR_DECAYS,
        default="none",
        help="decay the learning rate to near 0 at the last update of --epochs: linear, or "
        "cosine (Loshchilov & Hutter 2017); after --warmup's rise instead of 1/sqrt(step); "
        "none = constant (or --warmup's schedule)",
    )
    p.add_argument(
        "--label-smoothing",
        type=float,
        default=0.0,
        help="label smoothing of the training loss (Szegedy 2016; 0.1 in Vaswani 2017)",
    )
    p.add_argument(
        "--valid-decode",
        type=int,
        default=-1,
        help="greedy-decode this many valid sentences each epoch for exact match "
        "(-1 = all, 0 = none: validation loss only)",
    )
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm (0 = off)")
    p.add_argument(
        "--patience",
        type=int,
        default=3,
        help="stop after this many epochs in a row without a better valid loss (0 = off)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the initialisation and batches")
    p.add_argument(
        "--save-every",
        type=int,
        default=50,
        help="write a resumable checkpoint every N steps (0 = at epoch ends)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=0.0,
        help="stop after the update that crosses this many seconds (0 = no limit)",
    )
    p.add_argument(
        "--target-exact",
        type=float,
        default=0.0,
        help="stop after the epoch whose greedy valid exact match reaches this fraction, e.g. "
        "1.0 or 0.995 (0 = never; needs --valid-decode other than 0)",
    )
    p.add_argument(
        "--report-every",
        type=int,
        default=50,
        metavar="N",
        help="with stderr not a terminal (a log file, CI, nohup): a progress line (loss, "
        "updates/s, the epoch's ETA) every N updates or 30 s, whichever comes first (0 = "
        "every 30 s only); on a terminal a progress bar",
    )
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bar and no progress lines"
    )
    p.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model's forward (the first batches of each shape compile; "
        "then faster steps, see docs/performance.md)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads for torch (small recurrent models run fastest on one thread, and "
        "far faster than on two when other processes share the cores)",
    )


def add_data_args(p: argparse.ArgumentParser) -> None:
    # the registry of generated tasks; train/config.py, which add_train_args imports, has
    # imported it already (its data specs are checked against it)
    from ..data.tasks import TASKS

    g = p.add_argument_group("data: a built-in task, or corpus files")
    g.add_argument("--task", default=None, help=" | ".join(TASKS))
    g.add_argument(
        "--docs-csv",
        default=None,
        metavar="FILE",
        help="with --task docs: real documents, rows 'label,text' (.csv) or 'label<TAB>text' "
        "(.tsv), instead of generated ones; split 80/10/10 by --task-seed",
    )
    g.add_argument(
        "--train-text",
        default=None,
        metavar="FILE",
        help="--task lm (implied): a UTF-8 text to model character by character (.gz ok)",
    )
    g.add_argument(
        "--valid-text",
        default=None,
        metavar="FILE",
        help="--task lm: held-out text (default: the last 5% of --train-text)",
    )
    g.add_argument(
        "--segment", type=int, default=None, help="--task lm: characters per training segment "
        "(default 64)"
    )
    g.add_argument(
        "--pack", action="store_true", help="--task lm, --model transformer-lm: train on "
        "documents (paragraphs of --train-text, lines of the generated text) packed in rows "
        "of --segment, none attending another (docs/language-modelling.md)"
    )
    g.add_argument(
        "--asks", type=float, default=None, help="--task lm, generated text: the chance that "
        "a sentence of a record asks its name back (default 0.3; more: more long-range copies)"
    )
    g.add_argument("--task-seed", type=int, default=0, help="seed of the generated data")
    for split in ("train", "valid", "test"):
        size = f"tasks: {split} examples generated (default: the task's own)"
        g.add_argument(f"--{split}-size", type=int, default=None, help=size)
    g.add_argument("--min-len", type=int, default=None, help="copy/reverse/sort: shortest input")
    g.add_argument(
        "--max-len",
        type=int,
        default=None,
        help="copy/reverse/sort: longest input; corpora: drop pairs with a longer side "
        "(default 200 tokens; the count dropped is printed)",
    )
    g.add_argument("--train-tsv", default=None, help="TSV: source<TAB>target[<TAB>...] (.gz ok)")
    g.add_argument("--train-src", default=None, help="source side, one sentence a line")
    g.add_argument("--train-tgt", default=None, help="target side, line-aligned with --train-src")
    g.add_argument("--valid-src", default=None, help="held-out valid file, source side")
    g.add_argument("--valid-tgt", default=None, help="held-out valid file, target side")
    g.add_argument("--test-src", default=None, help="held-out test file, source side")
    g.add_argument("--test-tgt", default=None, help="held-out test file, target side")
    g.add_argument(
        "--tokenise",
        default="word",
        choices=["word", "char", "spm"],
        help="corpora: whitespace words, characters, or SentencePiece subwords learned from "
        "the training split (one model per language)",
    )
    g.add_argument("--spm-vocab", type=int, default=8000, help="subword vocabulary size")
    g.add_argument(
        "--strict",
        action="store_true",
        help="corpora: fail on a malformed line instead of skipping and counting it",
    )
    for split in ("valid", "test"):
        held_out = f"corpora without --{split}-src: share of the pairs held out"
        g.add_argument(f"--{split}-fraction", type=float, default=0.05, help=held_out)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train a sequence-to-sequence model (RNNsearch, ...)",
        description="Train a seq2seq model; writes OUT/best (lowest valid loss), "
        "OUT/last (resumable) and OUT/history.json. A thin layer over attnkit.fit. Training "
        "stops at the first of: --epochs epochs; --patience epochs in a row without a better "
        "valid loss; the valid exact match reaching --target-exact (off by default: a run at "
        "100% goes on until another rule stops it); --time-limit seconds; Ctrl-C (which "
        "saves OUT/last first). Each epoch ends with one line: train and valid loss, valid "
        "exact match, seconds.",
    )
    add_data_args(p)
    add_model_args(p)
    add_train_args(p)
    p.add_argument("--min-freq", type=int, default=1, help="vocabulary minimum frequency")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in OUT (when OUT holds none: a new run, with a warning)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in OUT (removes only the files attnkit wrote there)",
    )
    p.add_argument(
        "--nproc-per-node",
        type=int,
        default=None,
        metavar="N",
        help="train data-parallel in N processes on this machine (as torchrun would start "
        "them); Ctrl-C or a failed process ends it with one line",
    )
    p.set_defaults(run=run)


def fit_config(args: argparse.Namespace) -> Any:
    """The ``attnkit.FitConfig`` that these command-line arguments describe."""
    from dataclasses import fields

    from ..tasks.registry import data_family, family
    from ..train.config import DataConfig, FitConfig, ModelConfig, TrainConfig

    data = DataConfig(**{f.name: getattr(args, f.name) for f in fields(DataConfig)})
    if args.model is None:  # the task's own model: rnnsearch translates, captioner captions...
        args.model = family(data_family(data.spec())).default_model
    model = ModelConfig(args.model, args.preset, model_overrides(args))
    train = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        clip=args.clip,
        patience=args.patience,
        seed=args.seed,
        save_every=args.save_every,
        time_limit=args.time_limit,
        warmup=args.warmup,
        lr_decay=args.lr_decay,
        label_smoothing=args.label_smoothing,
        valid_decode=args.valid_decode,
        target_exact=args.target_exact,
        progress=not args.no_progress,
        report_every=args.report_every,
    )
    return FitConfig(
        data,
        model,
        train,
        out=args.out,
        resume=args.resume,
        overwrite=args.overwrite,
        device=args.device,
        threads=args.threads,
        compile=args.compile,
    )


def run(args: argparse.Namespace) -> int:
    if args.nproc_per_node is not None:  # the ranks get the same command without the flag
        from ..train.launch import launch, without_launch_flag

        return launch(args.nproc_per_node, without_launch_flag(args.command_line))
    from ..train.fit import fit

    result = fit(fit_config(args))
    if result.main:  # rank 0 (or the only process)
        print(
            f"stopped ({result.stopped}) after {result.epochs_run} epochs, {result.steps} "
            f"steps, {result.seconds:.0f}s; best valid loss {result.best_valid_loss:.4f}; "
            f"checkpoint in {result.best}"
        )
    return 0
