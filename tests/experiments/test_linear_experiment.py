"""The linear experiment (Katharopoulos 2020; experiments/linear): the checks on planted
numbers (each of the three outcomes), the design checks reading the compared arms only (a
reported arm at the floor, or off its plateau, withholds nothing), the slope statistics on
synthetic power laws, the cost kernels against each other, the decoding states, the
settings."""

from __future__ import annotations

import math
import random

import pytest
import torch
from _refusals import refused

from attnkit.experiments import evidence as ev
from attnkit.experiments.linear import LinearConfig
from attnkit.experiments.linear.checks import (
    cost_checks,
    crossover,
    memory_slope,
    plateaued,
    quality_checks,
    slope_gap,
    slope_of,
)
from attnkit.experiments.linear.measure import attention_of, decode_cost, layer_cost

NS = ["1024", "2048", "4096", "8192"]
TS = ["256", "1024", "4096"]


def power(p: float, xs: list[str], c: float = 1e-6, noise: float = 0.02, seed: int = 0,
          repeats: int = 5) -> dict[str, dict]:  # fmt: skip
    """A grid {x: {"seconds": repeats of c·x^p with multiplicative noise, "saved_bytes"}}."""
    rng = random.Random(seed)
    return {x: {"seconds": [c * int(x) ** p * math.exp(rng.gauss(0, noise))
                            for _ in range(repeats)],
                "saved_bytes": int(100 * int(x) ** p)} for x in xs}  # fmt: skip


def test_slopes_recover_planted_power_laws():
    assert slope_of(power(2.0, NS)).lo == pytest.approx(2.0, abs=0.05)
    assert memory_slope(power(1.0, NS)) == pytest.approx(1.0, abs=1e-3)
    gap = slope_gap(power(2.0, NS), power(1.0, NS, seed=1))
    assert gap.lo > 0.9 and gap.hi < 1.1
    # crossover: 1e-3·n against 1e-6·n² cross at n = 1000 (below the grid) and 4096 here
    fast, slow = power(1.0, NS, c=4.096e-3, noise=0), power(2.0, NS, noise=0)
    assert crossover(fast, slow) == pytest.approx(4096, rel=1e-6) or crossover(fast, slow) > 4096
    assert crossover(slow, fast) == 1024.0  # below from the first n on
    assert crossover(power(2.0, NS, c=1.0), power(1.0, NS)) is None


def cost_numbers(linear: float, softmax: float, dec_linear: float, dec_softmax: float):
    cost = {"linear": power(linear, NS), "softmax": power(softmax, NS, seed=1),
            "sliding": power(0.2, NS, seed=2)}  # fmt: skip
    decode = {"linear": power(dec_linear, TS, seed=3), "softmax": power(dec_softmax, TS, seed=4)}
    return cost, decode


def test_cost_checks_give_each_outcome():
    assert ev.verdict_of(cost_checks(*cost_numbers(1.0, 2.0, 0.0, 0.8))) == ev.REPRODUCED
    # linear grows as n²: NOT REPRODUCED (the memory slope too)
    v = ev.verdict_of(cost_checks(*cost_numbers(2.0, 2.0, 0.0, 0.8)))
    assert v.startswith("NOT REPRODUCED") and "linear time slope" in v
    # softmax's n² hidden (slope 1.2): the grid cannot tell
    v = ev.verdict_of(cost_checks(*cost_numbers(1.0, 1.2, 0.0, 0.8)))
    assert v.startswith("INCONCLUSIVE") and "grid sees n²" in v
    # decoding: linear's per-token time grows as t: NOT REPRODUCED
    v = ev.verdict_of(cost_checks(*cost_numbers(1.0, 2.0, 1.0, 1.0)))
    assert v.startswith("NOT REPRODUCED") and "decode slope" in v
    # the cache's growth does not show: INCONCLUSIVE
    v = ev.verdict_of(cost_checks(*cost_numbers(1.0, 2.0, 0.0, 0.0)))
    assert v.startswith("INCONCLUSIVE") and "cache growth" in v
    # the sliding window (reported) at any slope changes nothing
    cost, decode = cost_numbers(1.0, 2.0, 0.0, 0.8)
    cost["sliding"] = power(3.0, NS)
    assert ev.verdict_of(cost_checks(cost, decode)) == ev.REPRODUCED


def curve(stop: int, best: float = 0.9) -> list[float]:
    """A valid-bpc curve that falls to ``best`` at epoch ``stop`` - 8 and stays (patience 8)."""
    return [2.0 - (2.0 - best) * min(1.0, k / (stop - 8)) for k in range(1, stop + 1)]


def quality_numbers(gap: float, *, spread: float = 0.002, performer: float = 4.0):
    """5 seeds, 16 test blocks each: softmax ~0.9 bpc, linear = softmax + gap (+ noise),
    performer at ``performer`` bpc (4.0: the unigram floor) with a curve cut by the cap."""
    rng = random.Random(0)
    soft = [[0.9 + rng.gauss(0, 0.01) for _ in range(16)] for _ in range(5)]
    lin = [[b + gap + rng.gauss(0, spread) for b in row] for row in soft]
    perf = [[performer] * 16 for _ in range(5)]
    return {
        "bits": {"softmax": soft, "linear": lin, "performer": perf},
        "unigram": [4.0] * 5,
        "curves": {"softmax": [curve(40) for _ in range(5)],
                   "linear": [curve(44) for _ in range(5)],
                   "performer": [[4.0 - 0.01 * k for k in range(150)] for _ in range(5)]},
        "patience": 8,
        "cap": 150,
    }  # fmt: skip


def test_quality_checks_give_each_outcome():
    assert ev.verdict_of(quality_checks(quality_numbers(0.03))) == ev.REPRODUCED
    v = ev.verdict_of(quality_checks(quality_numbers(-0.03)))
    assert v.startswith("NOT REPRODUCED") and "linear bpc - softmax bpc" in v
    v = ev.verdict_of(quality_checks(quality_numbers(0.0, spread=0.05)))
    assert v.startswith("INCONCLUSIVE") and "holds both" in v


def test_design_checks_read_the_compared_arms_only():
    """performer (reported) sits at the unigram floor and was cut by the cap while still
    improving: the verdict does not move. The same faults on linear withhold it."""
    n = quality_numbers(0.03)
    checks = quality_checks(n)
    assert ev.verdict_of(checks) == ev.REPRODUCED
    assert not any("performer" in c.name for c in checks)
    n["bits"]["linear"] = [[4.0] * 16 for _ in range(5)]  # linear at the floor: not learned
    v = ev.verdict_of(quality_checks(n))
    assert v.startswith("INCONCLUSIVE") and "linear bpc / unigram" in v
    n = quality_numbers(0.03)
    n["curves"]["softmax"][2] = n["curves"]["performer"][0]  # one softmax run at the cap
    v = ev.verdict_of(quality_checks(n))
    assert v.startswith("INCONCLUSIVE") and "seed #3" in v
    assert "softmax: 4 of 5 runs on their valid-bpc plateau" in v
    n = quality_numbers(0.03)
    n["cap"] = 100  # 100 / 44 < 3: the cap may set linear's result
    n["curves"]["linear"] = [curve(44) for _ in range(5)]
    v = ev.verdict_of(quality_checks(n))
    assert v.startswith("INCONCLUSIVE") and "linear cap / median stop" in v


def test_plateaued_needs_the_last_patience_validations_flat():
    assert plateaued(curve(40), 8)
    assert not plateaued([2.0 - 0.01 * k for k in range(40)], 8)
    assert not plateaued([1.0] * 8, 8)  # no validation before the patience window


@pytest.mark.parametrize("kernel", ["linear", "softmax", "sliding"])
def test_the_cost_kernels_are_causal_attention(kernel):
    """Each kernel against a float64 reference written from its definition: softmax and
    the band with an explicit mask, linear from eq. 9 (φ = elu + 1, j <= i)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 40, 8, generator=g, dtype=torch.float64) for _ in range(3))
    got = attention_of(kernel, 5)(q, k, v)
    i, j = torch.arange(40)[:, None], torch.arange(40)[None, :]
    if kernel == "linear":
        e = (torch.nn.functional.elu(q) + 1) @ (torch.nn.functional.elu(k) + 1).transpose(-2, -1)
        e = e * (j <= i)
        want = (e / e.sum(-1, keepdim=True)) @ v
    else:
        ok = (j <= i) & ((i - j <= 5) if kernel == "sliding" else True)
        s = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~ok, -math.inf)
        want = s.softmax(-1) @ v
    torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-9)
    cost = layer_cost(kernel, 64, 1, 8, 5, repeats=2)
    assert cost["saved_bytes"] > 0 and len(cost["seconds"]) == 2


def test_decoding_states_stay_constant_for_linear_and_grow_for_softmax(one_thread):
    cfg = LinearConfig(dim=16, heads=2, layers=1, ff=16, decode_t="4,8,16", decode_tokens=2)
    out = decode_cost(cfg)
    lin = [out["linear"][t]["state"] for t in ("4", "8", "16")]
    soft = [out["softmax"][t]["state"] for t in ("4", "8", "16")]
    assert lin[0] == lin[1] == lin[2] == 2 * (8 * 8 + 8)  # H·(Dh·Dh + Dh): S and z per head
    assert soft == [1 * 2 * (t + 1) * 16 for t in (4, 8, 16)]  # keys and values of t + 1 tokens
    assert all(len(out[a][t]["seconds"]) == 2 for a in out for t in out[a])


test_settings_are_checked = refused(LinearConfig, [
    ({"arms": "softmax,performer"}, "lacks linear"),
    ({"arms": "softmax,linear,cosine"}, "--arms"),
    ({"decode_t": "256"}, "--decode-t"),
    ({"dim": 30}, "--dim 30"),
])


def test_default_settings():
    assert LinearConfig().seeds == 5 and LinearConfig().epochs >= 3 * LinearConfig().patience
