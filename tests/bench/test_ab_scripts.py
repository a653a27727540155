"""The A/B scripts' reports from hand-made runs: scripts/decode_ab.py's ratios (after / before,
above 1 = this checkout faster), agreeing hypotheses and medians, worked out by hand."""

from __future__ import annotations

from pathlib import Path

from _scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
decode_ab = load_script("decode_ab")


def run(greedy: float, beam: float, hyps: list[list[int]]) -> dict:
    return {"1": {"sentences_per_s": greedy, "hypotheses": hyps},
            "5": {"sentences_per_s": beam, "hypotheses": hyps}}  # fmt: skip


def test_decode_ab_report_ratios_agreement_and_medians() -> None:
    same, other = [[1, 2], [3]], [[1, 2], [4]]
    pairs = [
        (run(100.0, 50.0, same), run(200.0, 100.0, same)),  # x2.00, x2.00
        (run(100.0, 50.0, same), run(150.0, 110.0, other)),  # x1.50, x2.20; one hypothesis differs
        (run(200.0, 40.0, same), run(340.0, 60.0, same)),  # x1.70, x1.50
    ]
    lines = decode_ab.summarise(pairs)
    assert lines[0] == "pair 1 beam 1: before 100.0 sent/s, after 200.0, x2.00, same hypotheses 2/2"
    assert lines[3] == "pair 2 beam 5: before 50.0 sent/s, after 110.0, x2.20, same hypotheses 1/2"
    assert lines[-2] == "greedy: after / before = x1.70 (median of 3 pairs; range 1.50-2.00)"
    assert lines[-1] == "beam 5: after / before = x2.00 (median of 3 pairs; range 1.50-2.20)"


def _script(name: str):  # type: ignore[no-untyped-def]
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))  # its sibling scripts/_ab.py
    return load_script(name)


def test_rnnsearch_ab_report_pairs_the_rounds() -> None:
    """Ratios of the same rounds, x / y: before 2 s and after 1 s in every round is 2.000."""
    rec = {
        "before": [(2.0, 4.0)] * 4,
        "after": [(1.0, 1.0)] * 4,
        "plain": [(1.0, 2.0), (1.0, 2.0), (3.0, 6.0), (3.0, 6.0)],
    }
    lines = _script("rnnsearch_ab").report(rec)
    assert (
        lines[0]
        == "wall: median ms per update {'before': 2000.0, 'after': 1000.0, 'plain': 2000.0}"
    )
    assert lines[1] == "  before / after: 2.000 (2.000-2.000)"
    assert lines[2] == "  plain / after: 2.000 (1.000-3.000)"
    assert lines[5] == "  before / after: 4.000 (4.000-4.000)"


def test_sliding_ab_report_rates_and_ratios(capsys) -> None:  # type: ignore[no-untyped-def]
    """fwd FLOPs 1e9 at a 1e10 FLOP/s matmul: a 0.4 s forward is 25%; fwd+bwd (3x the FLOPs)
    in 1.2 s is 25%, the backward alone (0.8 s for 2e9) 25%; the ratios are after / before
    and local-attention / after; the quiet-sample filter drops the slow-matmul sample."""
    times = {
        ("before", "fwd"): [0.5, 9.0],
        ("after", "fwd"): [0.4, 9.0],
        ("before", "fwd+bwd"): [1.5, 9.0],
        ("after", "fwd+bwd"): [1.2, 9.0],
        ("local-attention", "fwd+bwd"): [3.6, 9.0],
    }
    rates = {key: [1e10, 1e9] for key in times}
    _script("sliding_ab")._report(times, rates, lambda r: r >= 8e9, 1e10, 1e9, "quiet")
    out = capsys.readouterr().out
    assert "  fwd      after                400 ms  25.0%" in out
    assert "  fwd+bwd  after               1200 ms  25.0%" in out
    assert "  after: backward alone 800 ms, 25.0%" in out
    assert "  fwd: after / before = 0.80" in out
    assert "  fwd+bwd: after / before = 0.80" in out
    assert "  fwd+bwd: local-attention / after = 3.00" in out


def test_compile_ab_summary_is_eager_over_compiled() -> None:
    ms = {"eager": [30.0, 28.0, 40.0], "compiled": [20.0, 14.0, 15.0]}
    assert _script("compile_ab").summary(ms) == (
        "eager 30.00 ms/step, compiled 15.00 ms/step, eager/compiled 2.00"
    )


def test_sparse_keep_backward_share() -> None:
    """Forward FLOPs 1e9 at a 1e10 FLOP/s matmul: forward 0.4 s, forward+backward 1.2 s, so
    the backward's 2e9 FLOPs take 0.8 s: 25% of the matmul rate."""
    share = _script("sparse_keep").backward_share(1e9, 0.4, 1.2, 1e10)
    assert abs(share - 25.0) < 1e-9


def test_sparse_parts_times_each_kernel_call_by_half() -> None:
    """The proxy times each call under its name and half (the band's operands are n rows long,
    the classes' fewer), passes the result through, leaves cached_empty untimed, and with
    --no-cache replaces it by a fresh new_empty."""
    import torch

    class Module:
        BLOCK = 64

        def forward_into(self, q: torch.Tensor) -> int:
            return q.shape[-2]

        def cached_empty(self, sizes: list[int], like: torch.Tensor) -> str:
            return "cached"

    calls: dict[str, list[float]] = {}
    timed = _script("sparse_parts")._Timed(Module(), 16, calls, False)
    assert timed.forward_into(torch.zeros(2, 16, 4)) == 16
    assert timed.forward_into(torch.zeros(8, 2, 4)) == 2
    assert timed.cached_empty([3], torch.zeros(1)) == "cached"
    assert timed.BLOCK == 64
    assert sorted(calls) == ["forward_into, band", "forward_into, classes"]
    assert all(len(v) == 1 and v[0] >= 0 for v in calls.values())
    plain = _script("sparse_parts")._Timed(Module(), 16, {}, True)
    fresh = plain.cached_empty([3, 2], torch.zeros(1, dtype=torch.float64))
    assert fresh.shape == (3, 2) and fresh.dtype == torch.float64


def test_sparse_threads_times_both_ways(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """scripts/sparse_threads.py runs the bench's step (small n here) with torch's threads as
    they are, or set again with --set, and prints the medians (the test restores the
    threads)."""
    import sys

    import torch

    before = torch.get_num_threads()
    try:
        for flags in ([], ["--set", "1"]):
            monkeypatch.setattr(sys, "argv", ["sparse_threads", "--n", "256", "--rounds", "1",
                                              *flags])  # fmt: skip
            _script("sparse_threads").main()
            line = capsys.readouterr().out
            assert line.startswith("n=256 threads=")
            assert ("set_num_threads(1)" in line) == bool(flags)
            assert "forward" in line and "backward" in line
    finally:
        torch.set_num_threads(before)


def test_sparse_parts_steps_times_after_the_warm_up() -> None:
    """``steps`` runs warm-up + rounds steps, times only the rounds (forward and backward each),
    clears the gradients before each step, and calls ``warmed`` once, when the warm-up ends."""
    import torch

    parts = _script("sparse_parts")
    case, q, k, v, g = parts.bench_inputs(64)
    assert q.shape == g.shape == (1, 8, 64, 64) and q.requires_grad and case.radius == 8
    seen: list[str] = []

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seen.append("step" if q.grad is None else "grad left over")
        return q * k + v

    forward, backward = parts.steps(fn, q, k, v, g, 3, 2, lambda: seen.append("warmed"))
    assert len(forward) == len(backward) == 3 and min(forward + backward) >= 0
    assert seen == ["step", "step", "warmed", "step", "step", "step"]
