"""The micro-timings behind four choices in the code (docs/perf/log-performance.md, "Figures behind
the code's choices"): the column form's softmax with the keys first (core._softmax_keys),
the finiteness check by one sum (_checks.check_finite), the cost of torch.broadcast_shapes
(skipped by _checks.broadcasts_to and the additive score), and the column form against the
fused kernel for small problems without autograd (core.COLUMN_SCORES). One thread, best of 7.

    python scripts/code_choices_timing.py
"""

from __future__ import annotations

import timeit
from typing import Any

import torch

from attnkit.core import column_attention, sdpa_context


def best(stmt: str, number: int, names: dict[str, Any]) -> float:
    """Seconds per call: the best of 7 repeats of ``number`` calls."""
    return min(timeit.repeat(stmt, number=number, repeat=7, globals=names)) / number


def main() -> None:
    torch.set_num_threads(1)
    s = torch.randn(64, 8, 20, 1)  # column scores (B, H, Tk, Tq) of a one-query step
    a = best("s.movedim(-2, 0).softmax(0).movedim(0, -2)", 2000, {"s": s})
    b = best("s.softmax(-2)", 2000, {"s": s})
    print(f"softmax keys first {a * 1e6:.1f} us, over dim -2 {b * 1e6:.1f} us: {b / a:.2f}x")
    x = torch.randn(64, 8, 50, 64)
    names = {"x": x, "torch": torch}
    a = best("bool(torch.isfinite(x.sum()))", 500, names)
    b = best("bool(torch.isfinite(x).all())", 500, names)
    print(f"finite by one sum {a * 1e6:.1f} us, isfinite().all() {b * 1e6:.1f} us: {b / a:.1f}x")
    a = best("torch.broadcast_shapes((64, 8), (64, 8))", 5000, {"torch": torch})
    print(f"torch.broadcast_shapes {a * 1e6:.1f} us a call")
    for lead in [(1, 4), (8, 4), (64, 8)]:
        for tq, tk in [(1, 20), (8, 8), (32, 32)]:
            q, k, v = (torch.randn(*lead, t, 64) for t in (tq, tk, tk))
            names = {"q": q, "k": k, "v": v, "column_attention": column_attention,
                     "sdpa_context": sdpa_context}  # fmt: skip
            with torch.no_grad():
                a = best("column_attention(q, k, v, None, False)", 200, names)
                b = best("sdpa_context(q, k, v, None)", 200, names)
            print(f"(B, H) = {lead}, Tq = {tq}, Tk = {tk}: column {a * 1e6:.0f} us, fused "
                  f"{b * 1e6:.0f} us, fused / column {b / a:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
