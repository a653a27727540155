"""``attnkit demo``: train RNNsearch (Bahdanau 2015) on the toy-ko task (about 15 s on an idle
CPU, a minute under load), score it on held-out sentences, translate examples, and draw an
attention heatmap."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

EXAMPLES = [
    "I am a student",
    "she reads a book in the library",
    "yesterday my friend ate a red apple",
    "they will go to the school tomorrow",
    "the teacher is not a doctor",
]


QUICK_NOTE = (
    "demo --quick: a smoke run (1,000 training sentences, one epoch) that checks the install; "
    "its numbers and translations mean nothing"
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="train RNNsearch on toy English->Korean (about 15 s on an idle CPU)",
        description="Train RNNsearch (Bahdanau 2015) on toy-ko, English -> Korean-like SOV "
        "(about 15 s on an idle 2-core CPU, a minute under load), score it on 500 held-out "
        "sentences (exact match, BLEU, chrF, attention AER), translate five examples and draw "
        "two attention heatmaps into OUT.",
    )
    p.add_argument("--out", default="attnkit-demo", help="output folder")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and the training")
    p.add_argument("--time-limit", type=float, default=150.0, help="training budget in seconds")
    p.add_argument("--epochs", type=int, default=12, help="most epochs of training")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch")
    p.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bar and no progress lines"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a seconds-long smoke run (1,000 training sentences, one epoch): checks an "
        "install; its scores and translations mean nothing",
    )
    p.set_defaults(run=run)


def demo_config(args: argparse.Namespace) -> Any:
    """The demo as a preset of ``attnkit.fit``: RNNsearch "small" on toy-ko, stopping at 99.5%
    valid exact match, two epochs without progress, or the time budget."""
    from ..train.config import DataConfig, FitConfig, ModelConfig, TrainConfig

    quick = getattr(args, "quick", False)
    return FitConfig(
        data=DataConfig(
            task="toy-ko",
            task_seed=args.seed,
            train_size=1000 if quick else None,
            valid_size=50 if quick else None,
            test_size=50 if quick else None,
        ),
        model=ModelConfig("rnnsearch", preset="small"),
        train=TrainConfig(
            epochs=1 if quick else args.epochs,
            batch_size=64,
            lr=2e-3,
            patience=2,
            seed=args.seed,
            time_limit=args.time_limit,
            target_exact=0.995,
            progress=not args.no_progress,
        ),
        out=Path(args.out) / "model",
        resume=False,
        overwrite=True,  # the demo's own folder: a second demo replaces the first
        device=args.device,
        threads=args.threads,
    )


def run(args: argparse.Namespace) -> int:
    from ..data.example import Example
    from ..decode import translate
    from ..eval.forced import attention_aer
    from ..eval.text import score
    from ..train import checkpoint
    from ..train.fit import fit, prepare
    from ..train.runtime import pick_device
    from ..viz import heatmap

    start = time.perf_counter()
    cfg = demo_config(args)
    out = Path(args.out)
    if getattr(args, "quick", False):
        print(QUICK_NOTE)
    print(
        "attnkit demo: RNNsearch (Bahdanau 2015; bi-GRU encoder, additive attention, GRU "
        "decoder)"
    )
    data = prepare(cfg.data)
    print(
        f"task toy-ko: English -> Korean-like SOV with particles; {len(data.splits.train)} "
        f"train / {len(data.splits.valid)} valid / {len(data.test)} held-out test sentences"
    )
    result = fit(cfg, log=print, data=data)
    best = checkpoint.load(result.best, pick_device(cfg.device))
    test = translate(best.model, data.test, data.src_vocab, data.tgt_vocab)
    s = score(test.hyps, data.test)
    aer = attention_aer(best.model, data.test, data.src_vocab, data.tgt_vocab)
    examples = [Example(x.split(), []) for x in EXAMPLES]
    tr = translate(best.model, examples, data.src_vocab, data.tgt_vocab)
    print("\ntranslations (greedy):")
    pngs = []
    for i, (e, hyp, w) in enumerate(zip(examples, tr.hyps, tr.weights, strict=True)):
        print(f"  {' '.join(e.src):<40} -> {' '.join(hyp)}")
        if i < 2 and w is not None:
            png = out / f"attention-{i + 1}.png"
            heatmap(
                w,
                [*hyp, "<eos>"][: w.shape[0]],  # no <eos> row when decoding hit its length cap
                [*e.src, "<eos>"],
                path=png,
                title="RNNsearch attention (additive score)",
            )
            pngs.append(str(png))
    wall = time.perf_counter() - start
    summary = {
        "test_sentences": s.n,
        "exact_match": s.exact_match,
        "bleu": s.bleu,
        "chrf": s.chrf,
        "attention_aer": aer,
        "parameters": result.parameters,
        "epochs": result.epochs_run,
        "train_seconds": result.seconds,
        "wall_seconds": wall,
        "stopped": result.stopped,
        "heatmaps": pngs,
        "checkpoint": str(result.best),
    }
    checkpoint.write_text(out / "summary.json", json.dumps(summary, indent=1, ensure_ascii=False))
    print("\nsummary")
    print(f"  held-out exact match  {100 * s.exact_match:.1f}%  ({s.n} sentences)")
    print(f"  held-out BLEU         {s.bleu:.1f}   chrF {s.chrf:.1f}")
    if aer is not None:
        print(f"  attention AER         {100 * aer:.1f}%  (argmax attention vs gold alignments)")
    print(
        f"  training              {result.epochs_run} epochs, {result.seconds:.0f}s "
        f"(stopped: {result.stopped})"
    )
    print(f"  wall time             {wall:.0f}s")
    print(f"  attention heatmaps    {', '.join(pngs)}")
    print(
        f"  checkpoint            {result.best}  (try: attnkit translate "
        f'--checkpoint {out / "model"} "I am a student")'
    )
    return 0
