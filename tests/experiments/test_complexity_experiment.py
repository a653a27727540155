"""``attnkit experiment complexity``: each measurement against an independent computation on a
tiny input (FLOPs by hand, saved bytes by hand, autograd depth of a known chain, path lengths
of small stacks, the band path by a spy), the fits, and the verdict on synthetic numbers."""

import copy
import math

import pytest
import torch
from _spies import only_path

from attnkit.experiments.complexity import ComplexityConfig
from attnkit.experiments.complexity.checks import crossover, slope, verdict
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


def test_slope_and_crossover() -> None:
    assert slope([2, 4, 8], [3 * 2**2, 3 * 4**2, 3 * 8**2]) == pytest.approx(2)
    c = crossover([10, 100], [0.1, 10.0])  # log-midway
    assert c == {"n": pytest.approx(math.sqrt(10 * 100), rel=1e-3), "where": "inside"}
    assert crossover([10, 100], [2.0, 3.0])["where"] == "below"
    assert crossover([10, 100], [1.0, 3.0]) == {"n": 10.0, "where": "inside"}
    assert crossover([10, 100], [0.2, 0.3]) == {"n": None, "where": "above"}


def _numbers() -> dict:
    """Synthetic numbers the table's claims hold for."""
    ns, ds = [64, 256, 1024, 2048], [64, 128]
    exps = {
        kind: {
            "time_n": {"64": t, "128": t},
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
        "64": {"time_ratio": {"64": 0.5, "256": 0.8}, "flops": {"n": 64.0}, "time": {}},
        "128": {"time_ratio": {"64": 0.3, "256": 1.5}, "flops": {"n": 128.0}, "time": {}},
    }
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


def test_verdict_passes_when_the_table_holds() -> None:
    reasons, checks = verdict(_numbers())
    assert reasons == [] and checks["reproduced"]
    # self-attention checked only at d = 64 (fit from 256 >= 4·64), not at d = 128
    assert set(checks["time_exponents_checked"]) >= {"self_attention@d=64"}
    assert "self_attention@d=128" not in checks["time_exponents_checked"]


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (lambda x: x["exponents"]["self_attention"]["time_n"].update({"64": 1.3}),
         "self_attention time grows as n^1.3 at d=64"),
        (lambda x: x["exponents"]["recurrent"]["time_n"].update({"128": 0.5}),
         "recurrent time grows as n^0.5"),
        (lambda x: x["exponents"]["convolution"].update(depth_n=0.5), "autograd depth"),
        (lambda x: x["exponents"]["recurrent"].update(depth_n=0.0), "recurrent autograd depth"),
        (lambda x: x["paths"]["restricted"].update(layers=5), "restricted path: 5 layers"),
        (lambda x: x["paths"]["recurrent"].update(steps=1), "recurrent path runs 1 steps"),
        (lambda x: x["crossover"]["128"]["time_ratio"].update({"64": 1.2}),
         "not faster than the GRU at n < d"),
        (lambda x: x["crossover"]["64"].update(flops={"n": None, "where": "above"}),
         "FLOP crossover is above"),
        (lambda x: x.update(flop_formula_max_rel_error=0.05), "differ from the formula"),
        (lambda x: x["exponents"]["self_attention"].update(flops_n=1.0), "not n²·d"),
        (lambda x: x["restricted_band"].update(matches_band_formula=False), "band kernel"),
    ],
)  # fmt: skip
def test_verdict_fails_with_the_number(edit, expect: str) -> None:
    numbers = copy.deepcopy(_numbers())
    edit(numbers)
    reasons, checks = verdict(numbers)
    assert not checks["reproduced"]
    assert any(expect in r for r in reasons), reasons


def test_a_grid_without_n_below_d_cannot_pass() -> None:
    numbers = copy.deepcopy(_numbers())
    for c in numbers["crossover"].values():
        c["time_ratio"] = {"4096": 0.5}
    reasons, _ = verdict(numbers)
    assert any("untested" in r for r in reasons)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ns": "64"}, "at least two lengths"),
        ({"ns": "64,abc"}, "comma-separated integers"),
        ({"ns": "0,64"}, "all >= 1"),
        ({"ds": "64,66"}, "divisible by --heads 4"),
        ({"heads": 0}, "divisible by --heads 0"),
        ({"kernel": 1}, "--kernel 1"),
        ({"radius": 0}, "--radius"),
        ({"repeats": 0}, "--repeats"),
        ({"path_n": 1}, "--path-n 1"),
    ],
)
def test_bad_config_fails_clearly(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ComplexityConfig(**kwargs)
