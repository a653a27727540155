"""The softness experiment's measurements of one trained model, and the cost of the reduction.

    exact_scores        test perplexity from the exact log-likelihood (the marginal over z for
                        hard, gumbel and variational) and variational's ELBO bound under q
    gradient_variance   how noisy the gradient of the attention's parameters is: R draws of
                        the training loss's gradient on one fixed batch,
                        Σ_i Var_r(g_ri) / Σ_i mean_r(g_ri)²  (0 for a deterministic loss)
    step_seconds        one training update (loss, backward, Adam) on a fixed batch
    reduction_cost      what hard attention saves: its reduction reads 1 value vector instead
                        of S; what it does not: the S scores are computed all the same

Legend: B batch, S source length (keys), D value width, A score width, m query width.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor


def relative_variance(grads: Sequence[Tensor]) -> float:
    """Σ_i Var_r(g_ri) / Σ_i mean_r(g_ri)² over R >= 2 flat gradients (R, P): the variance of
    a gradient estimator relative to its squared mean. NaN when every gradient is zero (the
    parameters take no part in the loss, e.g. the score under mean pooling)."""
    if len(grads) < 2:
        raise ValueError(f"{len(grads)} gradient draws; the variance needs at least 2")
    g = torch.stack([x.flatten().double() for x in grads])  # (R, P)
    var, mean_sq = float(g.var(0).sum()), float(g.mean(0).pow(2).sum())
    if mean_sq == 0:
        return 0.0 if var == 0 and bool(g.any()) else math.nan
    return var / mean_sq


def _training_loss(model: Any, batch: Any) -> Callable[[], Tensor]:
    """A seq2seq model's training loss on ``batch`` (a translation Batch), over the padded
    targets for every softness: soft and mean would otherwise pack them on the CPU
    (models/packed.py) and time faster for that alone, not for their softness."""
    b = batch
    return lambda: model.training_loss(b.src, b.src_len, b.tgt_in, b.tgt_out, packed=False)[0]


def gradient_variance(
    model: Any,
    batch: Any,
    draws: int,
    *,
    loss: Callable[[], Tensor] | None = None,
    params: Sequence[Tensor] | None = None,
) -> float:
    """``relative_variance`` of the training loss's gradient w.r.t. the attention's
    parameters (``params``; default ``model.attention``'s) over ``draws`` draws (seeds
    0..draws-1) on one batch; ``loss()`` computes the loss (default: a seq2seq model's on
    ``batch``); buffers are restored."""
    params = list(model.attention.parameters() if params is None else params)
    loss_of = _training_loss(model, batch) if loss is None else loss
    saved = {k: v.clone() for k, v in model.named_buffers()}
    grads = []
    model.train()
    try:
        for r in range(draws):
            torch.manual_seed(r)
            gs = torch.autograd.grad(loss_of(), params, allow_unused=True)
            flat = [torch.zeros_like(p) if g is None else g
                    for p, g in zip(params, gs, strict=True)]
            grads.append(torch.cat([g.flatten() for g in flat]))
    finally:
        model.eval()
        for k, v in model.named_buffers():
            v.copy_(saved[k])
    if not any(bool(g.any()) for g in grads):
        return math.nan
    return relative_variance(grads)


def median_seconds(fn: Callable[[], Any], reps: int) -> float:
    """Median wall time of ``fn()`` over ``reps`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def step_seconds(
    model: Any, batch: Any, reps: int, *, loss: Callable[[], Tensor] | None = None
) -> float:
    """Seconds of one training update (training loss ``loss()``, default a seq2seq model's on
    ``batch``; backward; Adam step with lr 0, so the weights stay as they are); buffers are
    restored."""
    saved = {k: v.clone() for k, v in model.named_buffers()}
    opt = torch.optim.Adam(model.parameters(), lr=0.0)
    loss_of = _training_loss(model, batch) if loss is None else loss

    def update() -> None:
        opt.zero_grad(set_to_none=True)
        loss_of().backward()
        opt.step()

    model.train()
    try:
        return median_seconds(update, reps)
    finally:
        model.eval()
        for k, v in model.named_buffers():
            v.copy_(saved[k])


class TokenNLL:
    """Sums over the real (non-padding) tokens of several batches: −log p, and −ELBO while
    every batch has one (variational); per-token perplexities exp(mean) of each."""

    def __init__(self) -> None:
        self.nll, self.bound, self.tokens, self.has_bound = 0.0, 0.0, 0, True

    def add(self, ll: Tensor, elbo: Tensor | None, tgt_out: Tensor) -> None:
        """One batch: log p and ELBO (B, T) per token, tgt_out (B, T) ids, 0 = padding."""
        real = tgt_out != 0  # (B, T)
        self.nll -= float(ll[real].sum())
        self.tokens += int(real.sum())
        if elbo is None:
            self.has_bound = False
        else:
            self.bound -= float(elbo[real].sum())

    def ppl(self) -> float:
        return math.exp(self.nll / self.tokens)

    def ppl_bound(self) -> float | None:
        return math.exp(self.bound / self.tokens) if self.has_bound else None


def exact_scores(model: Any, test: Sequence[Any], src_vocab: Any, tgt_vocab: Any) -> dict:
    """Per-token test perplexity exp(−mean log p(y_t | x, y<t)) from ``latent.token_scores``
    (exact: the marginal over the alignment where there is one) and, for variational, the
    perplexity bound exp(−mean ELBO_t) under q (None otherwise)."""
    from ...data.batching import batches
    from ...models.latent import token_scores

    sums = TokenNLL()
    for b in batches(list(test), src_vocab, tgt_vocab, 128):
        sums.add(*token_scores(model, b.src, b.src_len, b.tgt_in, b.tgt_out), b.tgt_out)
    return {"ppl": sums.ppl(), "ppl_bound": sums.ppl_bound(), "tokens": sums.tokens}


def score_flops(batch: int, keys: int, query: int, width: int) -> int:
    """Additive scores on projected keys (Bahdanau 2015, eq. 6, U_a h_j precomputed):
    W_a s (2·B·m·A) + the sum, tanh and v_a dot over S keys (4·B·S·A)."""
    return 2 * batch * query * width + 4 * batch * keys * width


def reduction_flops(batch: int, keys: int, dim: int) -> dict[str, int]:
    """Multiply-adds of the reduction: soft Σ_j α_j v_j is 2·B·S·D; hard v_z is a copy (0)."""
    return {"soft": 2 * batch * keys * dim, "hard": 0}


def reduction_cost(batch: int, keys: int, dim: int, width: int, reps: int) -> dict[str, Any]:
    """Time the additive scores and the reductions of one decoder step on random inputs
    (float32, this process's threads): soft Σ_j α_j v_j; hard by gathering v_z (what the
    models here do); hard as ``attnkit.mechanisms.hard.SampleReduce`` computes it
    (one_hot(z) @ V, as many multiply-adds as soft). FLOPs and value vectors read by formula."""
    from ...mechanisms.hard import SampleReduce
    from ...stages.normalisers import softmax
    from ...stages.scores import AdditiveScore

    torch.manual_seed(0)
    score = AdditiveScore(width, dim, width)
    q = torch.randn(batch, 1, width)  # (B, 1, m)
    values = torch.randn(batch, keys, dim)  # (B, S, D)
    rows = torch.arange(batch)
    with torch.no_grad():
        projected = score.project_keys(values)  # (B, S, A), once per sentence
        weights = softmax(score.on_projected_keys(q, projected), None)  # (B, 1, S)
        one_hot = SampleReduce(greedy=True)
        seconds = {
            "scores": median_seconds(lambda: score.on_projected_keys(q, projected), reps),
            "soft_reduce": median_seconds(lambda: weights @ values, reps),  # (B, 1, D)
            "hard_gather": median_seconds(
                lambda: values[rows, weights[:, 0].argmax(-1)], reps  # (B, D)
            ),
            "hard_one_hot": median_seconds(lambda: one_hot(weights, values), reps),
        }
    return {
        "batch": batch,
        "keys": keys,
        "dim": dim,
        "width": width,
        "flops": {"scores": score_flops(batch, keys, width, width),
                  **reduction_flops(batch, keys, dim)},  # fmt: skip
        "values_read": {"soft": batch * keys, "hard": batch},
        "seconds": seconds,
    }


__all__ = [
    "TokenNLL",
    "exact_scores",
    "gradient_variance",
    "median_seconds",
    "reduction_cost",
    "reduction_flops",
    "relative_variance",
    "score_flops",
    "step_seconds",
]
