"""Why do some local-p seeds of ``attnkit experiment alignment`` stall below BLEU 95? One
arm (swap order, source reversed, D = 5, the experiment's data and widths) trained as
``measure.train_arm`` trains it, instrumented: every ``--every`` updates it prints the greedy
valid BLEU, the mean training loss, the pre-clip gradient norm (mean, max, share of updates
clipped) and where local-p's predicted centre goes on the teacher-forced valid set:

    p_t = S · σ(v_pᵀ tanh(W_p h_t))     (Luong 2015, eq. 9; S = source words + <eos>)
    |p_t - s*(t)|, |p_t - s*(t-1)|      s*(t): the gold source word of target word t
    saturated: p_t < 0.5 or p_t > S - 0.5 (σ's argument beyond about ±3.8 for S ≈ 22);
               saturated_at_0: p_t < 0.5 alone
    mass: Σ_s a_t(s), the weights after the Gaussian prior (1 only if p_t sits on a word
          that takes all the softmax; small when the window misses the words that matter)

With the defaults (Adam 5e-3, clip 1, dropout 0, constant lr) the arm is the experiment's own
(the same BLEU curve). The options change the recipe: ``--clip 5 --dropout 0.2`` (Luong
2015, §4.1), ``--decay plateau`` (halve the lr at a check whose BLEU is not above the best so
far), ``--lr``.

    python scripts/alignment_localp.py --seed 3 [--row local-p] [--cap 1500] [--json F]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from typing import Any

import torch
from torch import Tensor, nn

from attnkit.data.batching import batches
from attnkit.data.vocab import Vocab
from attnkit.experiments.alignment.checks import CRITERION
from attnkit.experiments.alignment.data import splits
from attnkit.experiments.alignment.measure import ROWS, greedy_bleu
from attnkit.models import build_seq2seq
from attnkit.tasks.translate import translate_loss


def where_p_goes(model: Any, valid: list, sv: Vocab, tv: Vocab, window: int) -> dict[str, float]:
    """p_t of every word row of the teacher-forced valid set, against the gold links."""
    align = model.attention.align
    seen: list[Tensor] = []
    plain = align.position

    def record(query: Tensor, keys: Tensor, mask: Tensor | None = None) -> Tensor:
        p = plain(query, keys, mask)  # (B, 1)
        seen.append(torch.stack([p, mask.sum(-1).to(p.dtype)], -1))  # (B, 1, 2): p_t, S
        return p

    align.position = record
    dist_t, dist_prev, sat, low, mass, rel = [], [], [], [], [], []
    model.eval()
    with torch.no_grad():
        for b in batches(valid, sv, tv, 128):
            seen.clear()
            w = model(b.src, b.src_len, b.tgt_in).weights  # (B, T+1, S+1)
            ps = torch.cat(seen, 1)  # (B, T+1, 2)
            for j, i in enumerate(b.index):
                e = valid[i]
                gold = {t: s for s, t in e.links}
                for t in range(len(e.tgt)):
                    p, s_len = float(ps[j, t, 0]), float(ps[j, t, 1])
                    dist_t.append(abs(p - gold[t]))
                    if t > 0:
                        dist_prev.append(abs(p - gold[t - 1]))
                    sat.append(p < 0.5 or p > s_len - 0.5)
                    low.append(p < 0.5)
                    rel.append(p / s_len)
                    mass.append(float(w[j, t].sum()))
    del align.position
    return {
        "p_minus_gold_t": statistics.fmean(dist_t),
        "p_minus_gold_t_minus_1": statistics.fmean(dist_prev),
        "within_D_of_gold_t": statistics.fmean(d <= window for d in dist_t),
        "within_D_of_gold_t_minus_1": statistics.fmean(d <= window for d in dist_prev),
        "saturated": statistics.fmean(sat),
        "saturated_at_0": statistics.fmean(low),
        "p_over_S_mean": statistics.fmean(rel),
        "p_over_S_sd": statistics.pstdev(rel),
        "mass": statistics.fmean(mass),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--row", default="local-p", choices=sorted(ROWS))
    ap.add_argument("--ordering", default="swap")
    ap.add_argument("--cap", type=int, default=1500)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--decay", choices=("none", "plateau"), default="none")
    ap.add_argument("--warmup", type=int, default=0, help="linear lr warm-up, updates")
    ap.add_argument("--inverse-sqrt", action="store_true",
                    help="after the warm-up, lr * sqrt(warmup / step) (TrainConfig.lr_at)")
    ap.add_argument("--opt", choices=("adam", "sgd"), default="adam")
    ap.add_argument("--halve-after", type=int, default=0,
                    help="halve the lr every epoch after this many epochs (Luong: 5)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    train, valid, _ = splits(0, a.ordering, (3000, 200, 300))
    sv, tv = Vocab.build(e.src for e in train), Vocab.build(e.tgt for e in train)
    torch.manual_seed(a.seed)
    model = build_seq2seq("luong", preset=None, src_vocab=len(sv), tgt_vocab=len(tv), emb=32,
                          hidden=64, layers=1, cell="gru", window=5, reverse_source=True,
                          dropout=a.dropout, **dict(ROWS[a.row].options))  # fmt: skip
    make = torch.optim.Adam if a.opt == "adam" else torch.optim.SGD
    opt = make(model.parameters(), lr=a.lr)
    epoch = -(-len(train) // 32)  # updates per epoch
    if a.row == "local-p":
        print("init", where_p_goes(model, valid, sv, tv, 5), flush=True)
    rng = random.Random(a.seed)
    queue: list[Any] = []
    losses: list[float] = []
    norms: list[float] = []
    best, log = -1.0, []
    for i in range(a.cap):
        if not queue:
            queue.extend(batches(train, sv, tv, 32, rng))
        scale = min(1.0, (i + 1) / a.warmup) if a.warmup else 1.0
        if a.warmup and a.inverse_sqrt:
            scale = min(scale, (a.warmup / (i + 1)) ** 0.5)
        if a.halve_after and i >= a.halve_after * epoch:
            scale *= 0.5 ** ((i - a.halve_after * epoch) // epoch + 1)
        for g in opt.param_groups:
            g["lr"] = a.lr * scale * g.get("decayed", 1.0)
        model.train()
        loss, _ = translate_loss(model, queue.pop())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        inf = float("inf")
        norm = nn.utils.clip_grad_norm_(model.parameters(), a.clip if a.clip > 0 else inf)
        opt.step()
        losses.append(float(loss.detach()))
        norms.append(float(norm))
        if (i + 1) % a.every and i + 1 < a.cap:
            continue
        bleu = greedy_bleu(model, valid, sv, tv)
        row = {"updates": i + 1, "bleu": bleu, "loss": statistics.fmean(losses),
               "grad_norm_mean": statistics.fmean(norms), "grad_norm_max": max(norms),
               "clipped": statistics.fmean(n > a.clip for n in norms) if a.clip > 0 else 0.0,
               "lr": opt.param_groups[0]["lr"]}  # fmt: skip
        if a.row == "local-p":
            row |= where_p_goes(model, valid, sv, tv, 5)
        log.append(row)
        print(" ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in row.items()), flush=True)  # fmt: skip
        losses.clear()
        norms.clear()
        if bleu >= CRITERION:
            break
        if a.decay == "plateau" and bleu <= best:
            for g in opt.param_groups:
                g["decayed"] = g.get("decayed", 1.0) / 2
        best = max(best, bleu)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"args": vars(a), "log": log}, f, indent=1)


if __name__ == "__main__":
    main()
