"""``attnkit experiment parallel``: the graph depth against hand-counted and brute-force
paths, the cell-call counter against hand formulas, the exponent fit, the verdict on
synthetic numbers, bad settings, and a tiny run whose depths follow from the models."""

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from attnkit.experiments.parallel import (
    MIN_TIME_EXPONENT_GAP,
    QUICK,
    ParallelConfig,
    build,
    random_batch,
    run_experiment,
    sequential_ops,
    verdict,
)
from attnkit.experiments.parallel.measure import (
    count_cell_calls,
    graph_depth,
    power_exponent,
    time_steps,
)

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


def table(rnn_depth, tf_depth, rnn_time, tf_time, tf_calls=0) -> dict:
    ns = [8, 16, 32, 64]
    return {
        "rnnsearch": {"depth": rnn_depth, "cell_calls": [3 * n for n in ns],
                      "seconds_min": rnn_time},
        "transformer": {"depth": tf_depth, "cell_calls": [tf_calls] * 4,
                        "seconds_min": tf_time},
    }  # fmt: skip


def test_verdict_reproduced_and_not() -> None:
    ns = [8, 16, 32, 64]
    rnn_depth = [22 + 20 * n for n in ns]
    rnn_time = [0.01 * n for n in ns]  # exponent 1
    ok, checks = verdict(ns, table(rnn_depth, [140] * 4, rnn_time, [0.05 * n**0.3 for n in ns]))
    assert ok == [] and checks["reproduced"]
    assert checks["exponents"]["transformer"]["seconds_min"] == pytest.approx(0.3)
    assert checks["time_exponent_gap"] == pytest.approx(0.7)

    # both times linear: the timing half fails, the depth half holds
    same, checks = verdict(ns, table(rnn_depth, [140] * 4, rnn_time, [0.002 * n for n in ns]))
    assert len(same) == 1 and f"is not {MIN_TIME_EXPONENT_GAP} below" in same[0]

    # a Transformer whose depth grows, an RNN whose depth and time do not, a recurrent cell
    bad, _ = verdict(ns, table([400] * 4, [100, 150, 200, 250], [1.0] * 4, [1.0] * 4, 5))
    text = " ".join(bad)
    assert "RNNsearch depth exponent 0.00" in text
    assert "Transformer depth varies 2.50x" in text
    assert "RNNsearch step-time exponent 0.00" in text
    assert "5 recurrent cell calls" in text


def test_bad_settings_fail_clearly() -> None:
    with pytest.raises(ValueError, match="at least two different lengths"):
        ParallelConfig(lengths="8")
    with pytest.raises(ValueError, match="comma-separated integers"):
        ParallelConfig(lengths="8,x")
    with pytest.raises(ValueError, match="--batch-size 0; it must be >= 1"):
        ParallelConfig(batch_size=0)
    with pytest.raises(ValueError, match="divisible by --heads"):
        ParallelConfig(dim=50, heads=4)
    with pytest.raises(ValueError, match="--vocab 3"):
        ParallelConfig(vocab=3)


def test_a_tiny_run_records_depths_calls_and_writes_its_files(tmp_path: Path) -> None:
    from attnkit.experiments.parallel.report import report

    cfg = ParallelConfig(**{**QUICK, "lengths": "2,4"})
    result = run_experiment(cfg, tmp_path, say=lambda s: None)
    lines: list[str] = []
    report(result, tmp_path, lines.append)
    by = result["by_length"]
    assert by["rnnsearch"]["cell_calls"] == [6, 12]
    assert by["transformer"]["depth"][0] == by["transformer"]["depth"][1]
    assert result["checks"]["exponents"]["transformer"]["depth"] == 0.0
    assert result["parameters"]["rnnsearch"] == sum(
        p.numel() for p in build(cfg, "rnnsearch").parameters()
    )
    assert any(line.startswith("| n | RNNsearch depth |") for line in lines)
    assert lines[-1].startswith("verdict: ")
    saved = json.loads((tmp_path / "parallel.json").read_text())
    assert saved["config"]["lengths"] == "2,4" and saved["threads"] == 1
    assert (tmp_path / "parallel.csv").read_text().count("\n") == 3  # header + 2 lengths
