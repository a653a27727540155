"""``attnkit experiment parallel``: the graph depth against hand-counted and brute-force
paths, the cell-call counter against hand formulas, the exponent fit, the checks on
synthetic numbers (REPRODUCED, NOT REPRODUCED, INCONCLUSIVE on a straddling interval), bad
settings, and a tiny run whose depths follow from the models."""

import json
import math
from pathlib import Path

import pytest
import torch
from _refusals import refused
from torch import nn

from attnkit.experiments import evidence as ev
from attnkit.experiments.base import power_exponent
from attnkit.experiments.parallel import (
    QUICK,
    ParallelConfig,
    build,
    checks_of,
    random_batch,
    run_experiment,
    sequential_ops,
)
from attnkit.experiments.parallel.measure import count_cell_calls, graph_depth, time_steps

pytestmark = pytest.mark.usefixtures("one_thread_module")


def brute_longest_path(fn) -> int:
    """Every path enumerated, no memo: exponential, an independent reference on small graphs."""
    kids = [k for k, _ in fn.next_functions if k is not None]
    return 1 + max((brute_longest_path(k) for k in kids), default=0)


def test_depth_of_a_two_layer_net_is_counted_by_hand() -> None:
    """Sum <- Addmm <- Relu <- Addmm <- T <- AccumulateGrad(W1): 6 nodes on the longest path;
    10 nodes in all (Sum, 2 Addmm, Relu, 2 T, 4 AccumulateGrad)."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    loss = net(torch.randn(5, 3)).sum()
    assert graph_depth(loss) == (6, 10)
    assert brute_longest_path(loss.grad_fn) == 6


def test_depth_takes_the_longest_branch_and_counts_shared_nodes_once() -> None:
    w = torch.ones(2, requires_grad=True)
    a = w * 2  # Mul <- AccumulateGrad
    c = (a + a.exp()).sum()  # Sum <- Add <- {Mul, Exp <- Mul}
    assert graph_depth(c) == (5, 5)  # Sum, Add, Exp, Mul, AccumulateGrad
    assert graph_depth(torch.ones(2).sum()) == (0, 0)  # no graph


def recurrence(n: int) -> torch.Tensor:
    """h_t = tanh(w·h_{t-1} + x_t): each step adds Mul, Add, Tanh to the longest path."""
    w = torch.tensor(0.5, requires_grad=True)
    h = torch.zeros(())
    for x in torch.linspace(0, 1, n):
        h = torch.tanh(w * h + x)
    return h


def test_depth_of_a_recurrence_grows_by_three_per_step_without_recursion_limits() -> None:
    small = {n: graph_depth(recurrence(n))[0] for n in (1, 2, 7)}
    assert small == {n: brute_longest_path(recurrence(n).grad_fn) for n in (1, 2, 7)}
    assert small[2] - small[1] == 3 and small[7] - small[1] == 18
    assert graph_depth(recurrence(3000))[0] == small[1] + 3 * 2999  # deeper than the stack


def test_cell_calls_follow_the_hand_formula() -> None:
    """RNNsearch: one bidirectional encoder step per source token and direction, one decoder
    GRUCell call per target token: 2·S + T. The Transformer has no recurrent cell."""
    cfg = ParallelConfig(**QUICK)
    b = random_batch(2, 5, cfg.vocab, 0)
    rnn = build(cfg, "rnnsearch")
    with count_cell_calls(rnn) as calls:
        rnn(b.src, b.src_len, b.tgt_in[:, :3])  # S = 5, T = 3
    assert calls[0] == 2 * 5 + 3
    tf = build(cfg, "transformer")
    with count_cell_calls(tf) as calls:
        tf(b.src, b.src_len, b.tgt_in)
    assert calls[0] == 0
    lstm = nn.LSTM(3, 4, num_layers=2)  # time-major, unpacked: 6 steps x 2 layers
    with count_cell_calls(lstm) as calls:
        lstm(torch.randn(6, 2, 3))
    assert calls[0] == 12
    lstm(torch.randn(6, 2, 3))
    assert calls[0] == 12  # the hooks are gone after the block


def test_rnn_depth_is_affine_in_n_and_transformer_depth_constant() -> None:
    cfg = ParallelConfig(**QUICK)
    ops = {
        m: [sequential_ops(build(cfg, m), random_batch(2, n, cfg.vocab, n)) for n in (2, 3, 4)]
        for m in ("rnnsearch", "transformer")
    }
    d = [o["depth"] for o in ops["rnnsearch"]]
    assert d[1] - d[0] == d[2] - d[1] > 0  # the same number of nodes per extra token
    assert [o["cell_calls"] for o in ops["rnnsearch"]] == [6, 9, 12]  # 3 per token
    assert len({o["depth"] for o in ops["transformer"]}) == 1
    assert len({o["nodes"] for o in ops["transformer"]}) == 1  # wider tensors, same ops


def test_random_batch_is_full_and_shifted() -> None:
    b = random_batch(3, 6, 10, seed=1)
    assert b.src.shape == b.tgt_in.shape == b.tgt_out.shape == (3, 6)
    assert b.src_len.tolist() == [6, 6, 6]
    assert torch.equal(b.tgt_in[:, 1:], b.tgt_out[:, :-1])
    assert int(b.src.min()) >= 3 and int(b.tgt_out.max()) < 10  # no pad / bos / eos ids
    assert torch.equal(random_batch(3, 6, 10, seed=1).src, b.src)


def test_power_exponent() -> None:
    xs = [8, 16, 32, 64]
    assert power_exponent(xs, [3 * x**1.5 for x in xs]) == pytest.approx(1.5)
    assert power_exponent(xs, [7.0] * 4) == pytest.approx(0.0)
    assert math.isnan(power_exponent(xs, [0, 1, 2, 3]))


def test_time_steps_warm_up_then_alternate() -> None:
    order: list[str] = []
    times = time_steps([lambda: order.append("a"), lambda: order.append("b")], 2, 3)
    assert order == ["a", "a", "b", "b"] + ["a", "b"] * 3
    assert [len(t) for t in times] == [3, 3] and min(min(t) for t in times) >= 0


NS = [8, 16, 32, 64]
TIMED = [256, 512, 1024]


def repeats(f, spread: float = 0.0) -> list[float]:
    """Five timed repeats around f: factors 1 ± spread, median exactly f."""
    return [f * a for a in (1 - spread, 1 - spread / 2, 1.0, 1 + spread / 2, 1 + spread)]


def table(rnn_depth, tf_depth, tf_calls=0) -> dict:
    return {
        "rnnsearch": {"depth": rnn_depth, "cell_calls": [3 * n for n in NS]},
        "transformer": {"depth": tf_depth, "cell_calls": [tf_calls] * 4},
    }  # fmt: skip


def timed(rnn_speedup: float, tf_speedup: float, *, spread: float = 0.05, load: float = 0.3,
          cores: int = 2) -> dict:
    """Step times at TIMED: 1.0 s on one thread for both models, 1/speed-up on two."""
    def arm(s: float) -> dict:
        return {"1": [repeats(1.0, spread) for _ in TIMED],
                "2": [repeats(1.0 / s, spread) for _ in TIMED]}
    return {"seconds": {"rnnsearch": arm(rnn_speedup), "transformer": arm(tf_speedup)},
            "load": [load, load], "cores": cores, "ns": TIMED}  # fmt: skip


RNN_DEPTH = [22 + 20 * n for n in NS]


def by_name(checks: list[ev.Check]) -> dict[str, ev.Check]:
    return {c.name: c for c in checks}


def judge(t: dict, depth=None) -> list[ev.Check]:
    return checks_of(NS, depth or table(RNN_DEPTH, [140] * 4), t, 2, 1.5)


def test_checks_reproduced() -> None:
    checks = judge(timed(1.05, 1.6))
    assert ev.verdict_of(checks) == "REPRODUCED"
    c = by_name(checks)
    gap = c["n=512: log speed-up 1 -> 2 threads, Transformer - RNNsearch"]
    assert gap.value == pytest.approx(math.log(1.6) - math.log(1.05))
    assert gap.ci[0] > 0
    assert c["Transformer depth, max / min over n"].ci == (1.0, 1.0)  # exact: a point
    assert {x.kind for x in checks} == {"claim", "design"}


def test_checks_not_reproduced_name_the_number() -> None:
    # the RNN gains more from the second thread: the speed-up claim fails at every n
    verdict = ev.verdict_of(judge(timed(1.6, 1.05)))
    assert verdict.startswith("NOT REPRODUCED: n=256: log speed-up")
    assert ev.exit_code(verdict) == 1
    # a Transformer whose depth grows, an RNN whose depth does not, a recurrent cell
    bad = by_name(judge(timed(1.05, 1.6), table([400] * 4, [100, 150, 200, 250], 5)))
    failed = {name for name, c in bad.items() if c.outcome == ev.FAIL}
    assert failed == {"RNNsearch depth exponent in n", "Transformer depth, max / min over n",
                      "Transformer recurrent cell calls (most at any n)"}  # fmt: skip
    assert bad["Transformer depth, max / min over n"].value == pytest.approx(2.5)


def test_noisy_timings_that_straddle_zero_are_inconclusive() -> None:
    checks = judge(timed(1.3, 1.35, spread=0.6))
    c = by_name(checks)["n=256: log speed-up 1 -> 2 threads, Transformer - RNNsearch"]
    assert c.outcome == ev.INCONCLUSIVE and c.ci[0] < 0 < c.ci[1]
    assert ev.verdict_of(checks).startswith("INCONCLUSIVE: n=256: log speed-up")


def test_a_loaded_machine_or_one_core_cannot_tell() -> None:
    """Under a load average above 1.5, or with fewer cores than threads, the timings do not
    measure parallelism: INCONCLUSIVE, even where every interval passes."""
    loaded = ev.verdict_of(judge(timed(1.05, 1.6, load=6.0)))
    assert loaded.startswith("INCONCLUSIVE: 1-minute load average") and "6" in loaded
    one = ev.verdict_of(judge(timed(1.05, 1.6, cores=1)))
    assert one.startswith("INCONCLUSIVE: CPU cores for 2 threads")


test_bad_settings_fail_clearly = refused(ParallelConfig, [
    ({"lengths": "8"}, "at least two different lengths"),
    ({"lengths": "8,x"}, "comma-separated integers"),
    ({"batch_size": 0}, "--batch-size 0; it must be >= 1"),
    ({"dim": 50, "heads": 4}, "divisible by --heads"),
    ({"vocab": 3}, "--vocab 3"),
    ({"threads": 1}, "--threads 1: the speed-up compares"),
    ({"timing_lengths": "x"}, "--timing-lengths"),
])


def test_a_tiny_run_records_depths_calls_and_writes_its_files(tmp_path: Path) -> None:
    from attnkit.experiments.parallel.report import report

    cfg = ParallelConfig(**{**QUICK, "lengths": "2,4", "timing_lengths": "4"})
    result = run_experiment(cfg, tmp_path, say=lambda s: None)
    lines: list[str] = []
    report(result, tmp_path, lines.append)
    by = result["by_length"]
    assert by["rnnsearch"]["cell_calls"] == [6, 12]
    assert by["transformer"]["depth"][0] == by["transformer"]["depth"][1]
    assert result["exponents"]["transformer"]["depth"] == 0.0
    assert len(result["checks"]) == 7 and {"name", "ci", "outcome"} <= set(result["checks"][0])
    assert result["parameters"]["rnnsearch"] == sum(
        p.numel() for p in build(cfg, "rnnsearch").parameters()
    )
    t = result["timing"]
    assert [len(t["seconds"][m]["2"][0]) for m in ("rnnsearch", "transformer")] == [2, 2]
    assert len(t["load"]) == 2 and t["cores"] >= 1
    assert any(line.startswith("| n | RNNsearch depth |") for line in lines)
    assert lines[-1].startswith("verdict: ")
    assert any(line.startswith("| check | kind | value | 95% interval |") for line in lines)
    saved = json.loads((tmp_path / "parallel.json").read_text())
    assert saved["config"]["lengths"] == "2,4" and saved["threads"] == 2
    assert (tmp_path / "parallel.csv").read_text().count("\n") == 3  # header + n = 2, 4


def test_each_timed_length_is_judged_on_its_own() -> None:
    """The design checks read the machine (cores, load), not the models; the claim is checked
    at each n by itself: one length where the RNN gains more fails that length alone, and an
    average over the lengths (which still favours the Transformer) would have hidden it."""
    t = timed(1.05, 1.6)
    t["seconds"]["transformer"]["2"][2] = repeats(1.0 / 0.8, 0.05)  # n = 1024: 0.8 < 1.05
    checks = judge(t)
    failed = [c.name for c in checks if c.outcome == ev.FAIL]
    assert failed == ["n=1024: log speed-up 1 -> 2 threads, Transformer - RNNsearch"]
    assert {c.kind for c in checks if c.name.startswith(("CPU", "1-minute"))} == {"design"}
    assert ev.verdict_of(checks).startswith("NOT REPRODUCED: n=1024")
