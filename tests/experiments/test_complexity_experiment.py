"""``attnkit experiment complexity``: each measurement against an independent computation on a
tiny input (FLOPs by hand, saved bytes by hand, autograd depth of a known chain, path lengths
of small stacks, the band path by a spy), the fits, and the checks on synthetic numbers
(REPRODUCED, NOT REPRODUCED with the number, INCONCLUSIVE on a straddling interval and on a
grid that cannot test the claim)."""

import copy
import math

import pytest
import torch
from _refusals import refused
from _spies import only_path

from attnkit.experiments import evidence as ev
from attnkit.experiments.complexity import ComplexityConfig
from attnkit.experiments.complexity.checks import (
    checks_of,
    crossover,
    reported_of,
    slope,
    summarise,
)
from attnkit.experiments.complexity.models import (
    LAYERS,
    CausalConv,
    Recurrent,
    SavedBytes,
    expected_path,
    flop_counter,
    forward_flops,
    graph_depth,
    make_layer,
    make_stack_layer,
    measure,
    path_length,
    recurrent_steps,
    split_flops,
)
from attnkit.local import native

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("kind", LAYERS)
@pytest.mark.parametrize("n", [5, 40, 300])
def test_counted_flops_equal_the_hand_formula(kind: str, n: int) -> None:
    torch.manual_seed(0)
    b, d = 2, 8
    layer = make_layer(kind, d, heads=2, kernel=3, radius=3)
    with flop_counter() as fc:
        layer(torch.randn(b, n, d))
    total, attn = split_flops(fc)
    assert total == forward_flops(kind, b, n, d, 3, 3)
    if kind == "self_attention":  # QKᵀ and AV: 2·n·n·d multiply-adds, 2 FLOPs each
        assert attn == 2 * 2 * b * n * n * d
    if kind == "restricted" and n == 300 and native.kernel() is not None:
        # blocks of 64 queries: the first reaches keys 0..66, three reach 64 + 2·3 keys,
        # the last (44 queries, 256..299) keys 253..299
        pairs = 64 * 67 + 3 * 64 * 70 + 44 * 47
        assert attn == 2 * 2 * b * pairs * d < 4 * b * n * n * d
    elif kind == "restricted" and n == 300:  # SDPA tiles: 10 blocks of 32 reach 32 + 2·3 keys
        assert attn == 2 * 2 * b * 10 * 32 * (32 + 6) * d < 4 * b * n * n * d


def test_a_gru_step_is_six_d_by_d_products() -> None:
    """Independently of the formula: count nn.GRU's products on one step and on three."""
    gru = Recurrent(4)
    flops = []
    for n in (1, 3):
        with flop_counter() as fc:
            gru(torch.randn(1, n, 4))
        flops.append(fc.get_total_flops())
    assert flops == [6 * 2 * 4 * 4, 3 * 6 * 2 * 4 * 4]


def test_restricted_layer_takes_the_band_kernel() -> None:
    layer = make_layer("restricted", 8, heads=2, kernel=3, radius=4)
    with only_path("sliding"):
        layer(torch.randn(1, 300, 8))


def test_saved_bytes_counts_distinct_storages_not_parameters() -> None:
    w = torch.randn(3, 3, requires_grad=True)
    x = torch.randn(5, 3, requires_grad=True)
    hooks = SavedBytes([w])
    with hooks:
        y = x @ w  # saves x (and w, a parameter)
        z = y * y  # saves y twice: one storage
    assert hooks.total == 5 * 3 * 4 + 5 * 3 * 4
    del z


def test_graph_depth_of_a_known_chain() -> None:
    x = torch.randn(3, requires_grad=True)
    y = x
    for _ in range(7):
        y = y * 2
    assert graph_depth(y) == 7 + 1  # seven MulBackward and the leaf's AccumulateGrad
    z = (x + 1) * (x.exp() + x.sin().cos())  # the longest branch: sin, cos, add, mul
    assert graph_depth(z) == 4 + 1


def test_recurrent_steps_and_depth_grow_with_n() -> None:
    assert recurrent_steps(4, 10) == 9
    conv = CausalConv(4, 3)
    depths = [graph_depth(conv(torch.randn(1, n, 4, requires_grad=True))) for n in (4, 40)]
    assert depths[0] == depths[1]


@pytest.mark.parametrize(
    ("kind", "n", "want"),
    [
        ("recurrent", 9, 1),
        ("self_attention", 9, 1),
        ("conv_contiguous", 9, 4),  # each layer reaches k-1 = 2 further back: 8 / 2
        ("conv_contiguous", 10, 5),
        ("conv_dilated", 9, 2),  # receptive field 3^L: 9 after 2 layers
        ("conv_dilated", 10, 3),
        ("restricted", 9, 3),  # radius 3: 8 / 3 -> 3 layers
        ("restricted", 10, 3),
        ("restricted", 11, 4),
    ],
)
def test_path_lengths_of_small_stacks(kind: str, n: int, want: int) -> None:
    """By hand: the receptive field after L layers is 1 + L(k-1), k^L, or 1 + L·r backwards."""
    torch.manual_seed(0)

    def make(i: int) -> torch.nn.Module:
        return make_stack_layer(kind, i, 4, heads=1, kernel=3, radius=3)

    assert expected_path(kind, n, 3, 3) == want
    assert path_length(make, n, 4, max_layers=12) == want


def test_path_length_says_when_the_stack_is_too_shallow() -> None:
    def make(i: int) -> torch.nn.Module:
        return CausalConv(2, 2)

    assert path_length(make, 10, 2, max_layers=3) is None


def test_measure_times_and_counts() -> None:
    layer = make_layer("convolution", 4, heads=1, kernel=2, radius=1)
    m = measure(layer, torch.randn(1, 6, 4, requires_grad=True), repeats=2)
    assert m.flops_forward == 2 * 6 * 2 * 4 * 4 and m.flops_total > m.flops_forward
    assert m.cpu_seconds > 0 and m.wall_seconds > 0 and m.flops_attention == 0
    assert len(m.cpu_repeats) == 2 and m.cpu_seconds == min(m.cpu_repeats)


def test_slope_and_crossover() -> None:
    assert slope([2, 4, 8], [3 * 2**2, 3 * 4**2, 3 * 8**2]) == pytest.approx(2)
    c = crossover([10, 100], [0.1, 10.0])  # log-midway
    assert c == {"n": pytest.approx(math.sqrt(10 * 100), rel=1e-3), "where": "inside"}
    assert crossover([10, 100], [2.0, 3.0])["where"] == "below"
    assert crossover([10, 100], [1.0, 3.0]) == {"n": 10.0, "where": "inside"}
    assert crossover([10, 100], [0.2, 0.3]) == {"n": None, "where": "above"}


def _numbers() -> dict:
    """Synthetic numbers the table's claims hold for (time exponents with tight intervals)."""
    ns, ds = [64, 256, 1024, 2048], [64, 128]
    exps = {
        kind: {
            "time_n": {"64": t, "128": t},
            "time_n_ci": {"64": [t - 0.05, t + 0.05], "128": [t - 0.05, t + 0.05]},
            "saved_n": {"64": 1.0, "128": 1.0},
            "flops_n": fn,
            "flops_d": fd,
            "depth_n": dep,
            "depth": {},
        }
        for kind, t, fn, fd, dep in [
            ("recurrent", 1.0, 1.0, 2.0, 1.0),
            ("convolution", 0.95, 1.0, 2.0, 0.0),
            ("self_attention", 1.8, 2.0, 1.0, 0.0),
            ("restricted", 1.1, 1.0, 1.0, 0.02),
        ]
    }
    cross = {
        "64": {"time_ratio": {"64": 0.5, "256": 0.8}, "flops": {"n": 64.0}, "time": {},
               "below_d": None},
        "128": {"time_ratio": {"64": 0.3, "256": 1.5}, "flops": {"n": 128.0}, "time": {},
                "below_d": {"value": 0.3, "ci": [0.25, 0.4], "n": [64]}},
    }  # fmt: skip
    paths = {
        k: {"layers": v, "expected": v}
        for k, v in [
            ("recurrent", 1),
            ("conv_contiguous", 32),
            ("conv_dilated", 4),
            ("self_attention", 1),
            ("restricted", 4),
        ]
    }
    paths["recurrent"].update(steps=63, expected_steps=63)
    return {
        "ns": ns,
        "ds": ds,
        "fit_ns": ns[-3:],
        "exponents": exps,
        "flop_formula_max_rel_error": 0.0,
        "restricted_band": {"matches_band_formula": True, "fraction_of_dense": 0.1},
        "crossover": cross,
        "paths": paths,
    }


def test_checks_pass_when_the_table_holds() -> None:
    checks = checks_of(_numbers())
    assert ev.verdict_of(checks) == "REPRODUCED", [c.reason for c in checks if c.outcome != "pass"]
    names = {c.name for c in checks}
    # self-attention checked only at d = 64 (fit from 256 >= 4·64), not at d = 128
    assert "self_attention time exponent in n, d=64" in names
    assert not any(n.startswith("self_attention time exponent in n, d=128") for n in names)
    # a band is two checks on one interval; exact counts are points
    assert {"recurrent time exponent in n, d=64 > 0.7",
            "recurrent time exponent in n, d=64 < 1.3"} <= names  # fmt: skip
    by = {c.name: c for c in checks}
    assert by["restricted path: layers off Table 1's 4 by"].ci == (0.0, 0.0)
    assert {c.kind for c in checks if c.name.startswith("widths d")} == {"design"}


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (lambda x: x["exponents"]["self_attention"].update(
            time_n={"64": 1.3, "128": 1.3}, time_n_ci={"64": [1.2, 1.4], "128": [1.2, 1.4]}),
         "self_attention time exponent in n, d=64: 1.3"),
        (lambda x: x["exponents"]["recurrent"].update(
            time_n={"64": 1.0, "128": 0.5}, time_n_ci={"64": [0.9, 1.1], "128": [0.4, 0.6]}),
         "recurrent time exponent in n, d=128 > 0.7: 0.5"),
        (lambda x: x["exponents"]["convolution"].update(depth_n=0.5),
         "convolution autograd depth exponent in n: 0.5"),
        (lambda x: x["exponents"]["recurrent"].update(depth_n=0.0),
         "recurrent autograd depth exponent in n: 0"),
        (lambda x: x["paths"]["restricted"].update(layers=5),
         "restricted path: layers off Table 1's 4 by: 1"),
        (lambda x: x["paths"]["conv_dilated"].update(layers=None), "conv_dilated path: layers off"),
        (lambda x: x["paths"]["recurrent"].update(steps=1),
         "recurrent path: steps off n-1 = 63 by: 62"),
        (lambda x: x["crossover"]["64"].update(flops={"n": None, "where": "above"}),
         "FLOP crossover n*/d, d=64 < 2: 32"),  # above n = 2048 = 32·d: fails
        (lambda x: x.update(flop_formula_max_rel_error=0.05),
         "forward FLOPs: largest relative error"),
        (lambda x: x["exponents"]["self_attention"].update(flops_n=1.0),
         "self_attention FLOP exponents (n, d) vs n²·d: largest deviation: 1"),
    ],
)  # fmt: skip
def test_checks_fail_with_the_number(edit, expect: str) -> None:
    numbers = copy.deepcopy(_numbers())
    edit(numbers)
    checks = checks_of(numbers)
    verdict = ev.verdict_of(checks)
    assert verdict.startswith("NOT REPRODUCED: ") and ev.exit_code(verdict) == 1
    assert expect in verdict, verdict


def test_the_timed_n_below_d_ratio_is_reported_and_judges_nothing() -> None:
    """§4's timed claim cannot fail on a CPU, so it is reported beside the checks: a ratio
    above 1 (self-attention slower at some n < d) leaves the verdict as it was."""
    numbers = copy.deepcopy(_numbers())
    numbers["crossover"]["128"]["below_d"] = {"value": 1.2, "ci": [1.1, 1.3], "n": [64]}
    checks = checks_of(numbers)
    assert ev.verdict_of(checks) == "REPRODUCED"
    assert not any("time ratio" in c.name for c in checks)
    (shown,) = reported_of(numbers)
    assert shown["value"] == 1.2 and shown["ci"] == [1.1, 1.3] and "not checked" in shown["name"]


def test_a_time_exponent_interval_that_straddles_the_threshold_is_inconclusive() -> None:
    numbers = copy.deepcopy(_numbers())
    numbers["exponents"]["convolution"]["time_n_ci"]["64"] = [0.6, 1.1]  # value 0.95
    checks = checks_of(numbers)
    straddling = [c for c in checks if c.outcome == ev.INCONCLUSIVE]
    assert [c.name for c in straddling] == ["convolution time exponent in n, d=64 > 0.7"]
    verdict = ev.verdict_of(checks)
    assert verdict.startswith("INCONCLUSIVE: convolution time exponent") and (
        ev.exit_code(verdict) == 2)


def test_a_grid_without_n_below_d_or_without_the_band_kernel_cannot_tell() -> None:
    numbers = copy.deepcopy(_numbers())
    for c in numbers["crossover"].values():
        c["below_d"] = None
    numbers["exponents"]["recurrent"]["depth_n"] = 0.0  # a failed claim does not decide it
    verdict = ev.verdict_of(checks_of(numbers))
    assert verdict.startswith("INCONCLUSIVE: widths d with a grid point n < d: 0") and (
        "cannot test the claim" in verdict)
    numbers = copy.deepcopy(_numbers())
    numbers["restricted_band"]["matches_band_formula"] = False
    assert ev.verdict_of(checks_of(numbers)).startswith("INCONCLUSIVE: restricted layer took")


def test_summarise_fits_medians_with_bootstrap_intervals() -> None:
    """Rows built from exact power laws (every repeat the same): the time exponents are the
    laws' (1 for the GRU, 2 for attention) with point intervals; noisy repeats widen them;
    the ratio at n < d is the median ratio."""
    ns, ds = [16, 64, 256, 1024], [64]
    law = {"recurrent": 1, "convolution": 1, "self_attention": 2, "restricted": 1}

    def row(kind: str, n: int, noise: float) -> dict:
        ms = 1e-3 * n ** law[kind]
        return {"layer": kind, "n": n, "d": 64, "ms": ms, "saved_bytes": n, "depth": 5,
                "ms_repeats": [ms * (1 - noise), ms, ms * (1 + noise)], "flops_term": n,
                "flops_forward": n ** law[kind], "flops_formula": n ** law[kind],
                "flops_term_formula": n}  # fmt: skip

    exact = summarise([row(k, n, 0.0) for k in law for n in ns], ns, ds)
    assert exact["exponents"]["self_attention"]["time_n"]["64"] == pytest.approx(2.0)
    assert exact["exponents"]["recurrent"]["time_n_ci"]["64"] == pytest.approx([1.0, 1.0])
    below = exact["crossover"]["64"]["below_d"]
    assert below["n"] == [16] and below["value"] == pytest.approx(16**2 / 16)
    noisy = summarise([row(k, n, 0.3) for k in law for n in ns], ns, ds)
    lo, hi = noisy["exponents"]["recurrent"]["time_n_ci"]["64"]
    assert lo < 1.0 < hi


test_bad_config_fails_clearly = refused(ComplexityConfig, [
    ({"ns": "64"}, "at least two lengths"),
    ({"ns": "64,abc"}, "comma-separated integers"),
    ({"ns": "0,64"}, "all >= 1"),
    ({"ds": "64,66"}, "divisible by --heads 4"),
    ({"heads": 0}, "divisible by --heads 0"),
    ({"kernel": 1}, "--kernel 1"),
    ({"radius": 0}, "--radius"),
    ({"repeats": 0}, "--repeats"),
    ({"path_n": 1}, "--path-n 1"),
])
