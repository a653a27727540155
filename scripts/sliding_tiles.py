"""The CPU flash kernels alone on the sliding window's interior tiles, per query block b: the
(b, L = b + W - 1) band tiles of n = 16,384 queries (B·H = 8, d = 64) through
``_scaled_dot_product_flash_attention_for_cpu`` and its backward with the band as a float
mask, interleaved with a 2048² matmul; % of the matmul rate for the useful band FLOPs (and,
backward, for the computed L keys).

    python scripts/sliding_tiles.py --threads 1 --cpu-time --blocks 32,64,128,192,256,384,768
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
FLASH_BACK = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--radius", type=int, default=256)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--blocks", default="32,64,128,192,256,384,768")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cpu-time", action="store_true", help="process CPU time, not wall time")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    clock = time.process_time if a.cpu_time else time.perf_counter
    g, d, n, r = 8, 64, a.n, a.radius
    width = r + 1 if a.causal else 2 * r + 1
    useful = 4 * n * width * d * g
    gen = torch.Generator().manual_seed(0)
    x = [torch.randn(g, n + 2 * r + 1024, d, generator=gen) for _ in range(3)]
    mat = torch.randn(2048, 2048, generator=gen)

    def cases(b: int) -> tuple:
        big_l, nb = b + width - 1, n // b
        qt = x[0][:, r : r + nb * b].reshape(g, nb, b, d)  # (G, nb, b, D)
        kt, vt = (t[:, : (nb - 1) * b + big_l].unfold(1, big_l, b).transpose(-1, -2) for t in x[1:])
        col, row = torch.arange(big_l)[None], torch.arange(b)[:, None] + r  # query a at a + r
        band = (col >= row - r) & (col <= row + (0 if a.causal else r))  # (b, L)
        bias = torch.zeros(b, big_l).masked_fill_(~band, -math.inf)
        out, lse = FLASH(qt, kt, vt, 0.0, False, attn_mask=bias, scale=d**-0.5)
        dout = torch.randn(qt.shape, generator=gen)

        def fwd() -> None:
            FLASH(qt, kt, vt, 0.0, False, attn_mask=bias, scale=d**-0.5)

        def bwd() -> None:
            FLASH_BACK(dout, qt, kt, vt, out, lse, 0.0, False, attn_mask=bias, scale=d**-0.5)

        return fwd, bwd, nb * b, big_l

    blocks = [int(s) for s in a.blocks.split(",")]
    steps = {b: cases(b) for b in blocks}
    res: dict[int, tuple[list[float], list[float]]] = {b: ([], []) for b in blocks}
    rates = []
    for _ in range(a.rounds):
        for b, (fwd, bwd, rows, _) in steps.items():
            t = clock()
            mat @ mat
            rates.append(2 * 2048**3 / (clock() - t))
            for i, step in enumerate((fwd, bwd)):
                t = clock()
                step()
                res[b][i].append((clock() - t) * n / rows)
    rate = statistics.median(rates)
    kind = "CPU" if a.cpu_time else "wall"
    print(f"r={r} {'causal' if a.causal else 'symmetric'}, {a.threads} thread(s), {kind} time, "
          f"matmul {rate / 1e9:.0f} GFLOP/s")  # fmt: skip
    print("| b | L | fwd ms | fwd % useful | bwd ms | bwd % useful | bwd % of computed |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for b, (tf, tb) in res.items():
        f, bw, big_l = statistics.median(tf), statistics.median(tb), steps[b][3]
        pf, pb = 100 * useful / f / rate, 100 * 2 * useful / bw / rate
        print(f"| {b} | {big_l} | {f * 1e3:.0f} | {pf:.0f} | {bw * 1e3:.0f} | {pb:.0f} | "
              f"{pb * big_l / width:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
