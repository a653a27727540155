"""``attnkit demo``: train RNNsearch (Bahdanau 2015) on the toy-ko task in a few minutes on a
CPU, score it on held-out sentences, translate examples, and draw an attention heatmap."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

EXAMPLES = [
    "I am a student",
    "she reads a book in the library",
    "yesterday my friend ate a red apple",
    "they will go to the school tomorrow",
    "the teacher is not a doctor",
]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="train RNNsearch on toy English->Korean in ~2 minutes")
    p.add_argument("--out", default="attnkit-demo", help="output folder (default attnkit-demo/)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--time-limit",
        type=float,
        default=150.0,
        help="training time budget in seconds (default 150)",
    )
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default 1)")
    p.add_argument("--device", default="cpu", help="auto | cpu | cuda (default cpu)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import torch

    from ..data.example import Example
    from ..data.tasks import load_task
    from ..data.vocab import Vocab
    from ..decode import translate
    from ..eval.forced import attention_aer
    from ..eval.text import score
    from ..models import build_model
    from ..train import checkpoint
    from ..train.loop import TrainConfig, train
    from ..viz import heatmap
    from .train import pick_device, set_threads

    start = time.perf_counter()
    set_threads(args.threads)
    out = Path(args.out)
    splits = load_task("toy-ko", seed=args.seed)
    src_vocab = Vocab.build(e.src for e in splits.train)
    tgt_vocab = Vocab.build(e.tgt for e in splits.train)
    torch.manual_seed(args.seed)
    model = build_model(
        "rnnsearch", preset="small", src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab)
    ).to(pick_device(args.device))
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"attnkit demo: RNNsearch (Bahdanau 2015; bi-GRU encoder, additive attention, GRU "
        f"decoder, {n_params:,} parameters)"
    )
    print(
        f"task toy-ko: English -> Korean-like SOV with particles; {len(splits.train)} train / "
        f"{len(splits.valid)} valid / {len(splits.test)} held-out test sentences"
    )
    cfg = TrainConfig(
        epochs=args.epochs,
        batch_size=64,
        lr=2e-3,
        patience=2,
        seed=args.seed,
        time_limit=args.time_limit,
        target_exact=0.995,
        progress=not args.no_progress,
    )
    result = train(
        model,
        "rnnsearch",
        splits.train,
        splits.valid,
        src_vocab,
        tgt_vocab,
        cfg,
        out / "model",
        meta={"task": "toy-ko", "task_seed": args.seed},
    )
    best = checkpoint.load(out / "model" / "best", pick_device(args.device))
    test = translate(best.model, splits.test, src_vocab, tgt_vocab)
    s = score(test.hyps, splits.test)
    aer = attention_aer(best.model, splits.test, src_vocab, tgt_vocab)
    examples = [Example(x.split(), []) for x in EXAMPLES]
    tr = translate(best.model, examples, src_vocab, tgt_vocab)
    print("\ntranslations (greedy):")
    pngs = []
    for i, (e, hyp, w) in enumerate(zip(examples, tr.hyps, tr.weights, strict=True)):
        print(f"  {' '.join(e.src):<40} -> {' '.join(hyp)}")
        if i < 2 and w is not None:
            png = out / f"attention-{i + 1}.png"
            heatmap(
                w,
                [*hyp, "<eos>"],
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
        "epochs": result.epochs_run,
        "train_seconds": result.seconds,
        "wall_seconds": wall,
        "stopped": result.stopped,
        "heatmaps": pngs,
        "checkpoint": str(out / "model" / "best"),
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
        f"  checkpoint            {out / 'model' / 'best'}  (try: attnkit translate "
        f'--checkpoint {out / "model"} "I am a student")'
    )
    return 0
