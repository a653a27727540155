"""One arm of the alignment experiment: train one model on one ordering to the criterion
(greedy valid BLEU >= CRITERION, checked every ``eval_every`` updates) or the cap, then score
its force-decoded attention on the test set.

    AER  = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)     (Och & Ney 2003), A = argmax links
    offset(t) = argmax_s a_t(s) - s*(t)              s*: the gold source word of target word t

Every target word has exactly one gold source word here (data.py), so AER = 1 - the share of
words whose argmax is their gold word, and ``offsets`` says where the others point.

Two AERs per arm: ``aer`` reads row t (the step predicting y_t) as target word t for every
row, and is what the checks use (fixed before the runs); ``aer_paper`` reads it as Luong et
al. (2015, footnote 14) do for their Table 6, row by row (``Row.paper_row_shift``): the
content-based rows (general) score the step fed y_t as word t, global (location) the same as
``aer``. Reported beside it, not checked.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ...data.example import Example
from ...data.vocab import Vocab
from ...eval.alignment import evaluate_alignments
from ...eval.forced import forced_attention, gold_from_examples
from ...train.config import warmup_lr
from ...train.updates import run_updates, update
from .checks import CRITERION
from .data import splits


@dataclass(frozen=True)
class Row:
    """One model of the comparison: its label, attnkit model and attention options."""

    label: str
    model: str  # attnkit model name
    options: tuple[tuple[str, str], ...]  # alignment and score of the luong model
    paper_aer: float | None  # Luong et al. 2015, Table 6 (None: not in it)
    windowed: bool  # D matters
    # the row Luong et al. (2015, footnote 14) read as target word t: 0, the step predicting
    # y_t (location-based scores); 1, the step fed y_t (content-based: dot, general, concat).
    # RNNsearch is not in the paper's Table 6: read as attnkit reads every row (0).
    paper_row_shift: int


ROWS: dict[str, Row] = {
    "global-location": Row("global (location)", "luong",
                           (("align", "global"), ("score", "location")), 0.39, False, 0),
    "global-general": Row("global (general)", "luong",
                          (("align", "global"), ("score", "general")), None, False, 1),
    "local-m": Row("local-m (general)", "luong",
                   (("align", "local-m"), ("score", "general")), 0.34, True, 1),
    "local-p": Row("local-p (general)", "luong",
                   (("align", "local-p"), ("score", "general")), 0.36, True, 1),
    "rnnsearch": Row("RNNsearch (Bahdanau)", "rnnsearch", (), None, False, 0),
}  # fmt: skip


@dataclass(frozen=True)
class Arm:
    """One trained model: ordering, row, D (0 for a row without a window), source reversed
    (Luong rows), seed."""

    ordering: str
    row: str
    window: int
    reverse: bool
    seed: int

    @property
    def name(self) -> str:
        d = f" D={self.window}" if self.window else ""
        r = " reversed" if self.reverse else ""
        return f"{self.ordering} {self.row}{d}{r} seed {self.seed}"


@dataclass(frozen=True)
class Setting:
    """What every arm shares: data sizes and seed, widths, optimiser, cap, criterion."""

    data_seed: int
    train_size: int
    valid_size: int
    test_size: int
    emb: int
    hidden: int
    batch_size: int
    lr: float
    cap: int
    eval_every: int
    threads: int
    warmup: int = 0  # updates of linear lr warm-up, then lr·sqrt(warmup/step); 0: constant lr


def build(arm: Arm, s: Setting, src_vocab: int, tgt_vocab: int) -> Any:
    """The arm's model, seeded by ``arm.seed``: the same widths for every row."""
    from ...models import build_seq2seq

    r = ROWS[arm.row]
    torch.manual_seed(arm.seed)
    if r.model == "luong":
        return build_seq2seq("luong", preset=None, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                             emb=s.emb, hidden=s.hidden, layers=1, cell="gru",
                             window=arm.window or 1, reverse_source=arm.reverse,
                             **dict(r.options))  # fmt: skip
    return build_seq2seq("rnnsearch", preset="small", src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                         emb=s.emb, enc_hidden=s.hidden, dec_hidden=s.hidden,
                         attn_hidden=s.hidden, maxout=s.hidden, dropout=0.0)  # fmt: skip


def greedy_bleu(model: Any, examples: Sequence[Example], src_vocab: Vocab,
                tgt_vocab: Vocab) -> float:  # fmt: skip
    """Corpus BLEU (0-100) of the greedy translations of ``examples``."""
    from ...decode import translate
    from ...eval.text import score

    model.eval()
    hyps = translate(model, examples, src_vocab, tgt_vocab, batch_size=128).hyps
    return float(score(hyps, examples).bleu)


def offsets(weights: Sequence[Tensor], examples: Sequence[Example]) -> dict[int, int]:
    """How far the argmax lands from the gold source word, over every target word with one
    gold link: {offset: count}."""
    out: Counter[int] = Counter()
    for w, e in zip(weights, examples, strict=True):
        gold: dict[int, list[int]] = {}
        for s, t in e.links:
            gold.setdefault(t, []).append(s)
        top = w.argmax(dim=-1).tolist()  # (T,)
        out.update(top[t] - ss[0] for t, ss in gold.items() if len(ss) == 1)
    return dict(out)


def train_arm(arm: Arm, s: Setting) -> dict[str, Any]:
    """Train ``arm`` (Adam at ``s.lr``, warmed up over ``s.warmup`` updates and then decayed
    as 1/sqrt(update) when ``s.warmup`` > 0; batches of ``s.batch_size`` drawn with its seed;
    gradient clip 1) until its greedy valid BLEU reaches CRITERION at a check every
    ``s.eval_every`` updates, or ``s.cap`` updates; then score the test set."""
    from ...data.batching import batches
    from ...tasks.translate import translate_loss

    torch.set_num_threads(s.threads)
    train, valid, test = splits(s.data_seed, arm.ordering,
                                (s.train_size, s.valid_size, s.test_size))  # fmt: skip
    src_vocab = Vocab.build(e.src for e in train)
    tgt_vocab = Vocab.build(e.tgt for e in train)
    model = build(arm, s, len(src_vocab), len(tgt_vocab))
    opt = torch.optim.Adam(model.parameters(), lr=s.lr)
    rng = random.Random(arm.seed)
    queue: list[Any] = []
    curve: list[tuple[int, float]] = []
    t0, cpu0 = time.perf_counter(), time.process_time()

    def batch_at(i: int) -> Any:
        if not queue:
            queue.extend(batches(train, src_vocab, tgt_vocab, s.batch_size, rng))
        return queue.pop()

    def update_on(i: int, b: Any) -> float:
        for group in opt.param_groups:
            group["lr"] = warmup_lr(s.lr, s.warmup, i + 1)
        model.train()
        loss, _ = translate_loss(model, b)
        update(model, opt, loss, 1.0)
        return float(loss.detach())

    def after(i: int, loss: float, b: Any) -> str | None:
        if (i + 1) % s.eval_every and i + 1 < s.cap:
            return None
        curve.append((i + 1, greedy_bleu(model, valid, src_vocab, tgt_vocab)))
        return "criterion" if curve[-1][1] >= CRITERION else None

    run_updates(0, s.cap, batch_at, update_on, after)
    seconds = time.perf_counter() - t0
    model.eval()
    weights = forced_attention(model, test, src_vocab, tgt_vocab)  # (T_i, S_i) each
    gold = gold_from_examples(test)
    aer = evaluate_alignments(weights, gold).aer_argmax
    shift = ROWS[arm.row].paper_row_shift
    fed = forced_attention(model, test, src_vocab, tgt_vocab, row_shift=shift) if shift else None
    return {
        "updates": curve[-1][0],
        "valid_bleu": curve[-1][1],
        "reached": curve[-1][1] >= CRITERION,
        "curve": curve,
        "aer": aer,  # row t = the word its step predicts (what the checks use)
        "aer_paper": aer if fed is None else evaluate_alignments(fed, gold).aer_argmax,
        "paper_row_shift": shift,
        "test_bleu": greedy_bleu(model, test, src_vocab, tgt_vocab),
        "offsets": offsets(weights, test),
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": round(seconds, 1),
        "cpu_seconds": round(time.process_time() - cpu0, 1),
    }


def train_job(job: tuple[Arm, Setting]) -> dict[str, Any]:
    """``train_arm`` of one (arm, setting): what a pool worker runs."""
    return train_arm(*job)


__all__ = ["CRITERION", "ROWS", "Arm", "Row", "Setting", "build", "greedy_bleu", "offsets",
           "train_arm", "train_job"]  # fmt: skip
