"""Measurements of the parallel experiment that know nothing of its models: the longest
path of an autograd graph, recurrent cell calls counted by forward hooks, and steps timed in
turn (the exponents are fitted by ``base.power_exponent`` and ``evidence.exponent_interval``).

Legend: B batch, T time steps.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from torch import nn

from ...bench.measure import graph_depth


def _steps_of(module: nn.Module, inputs: tuple[Any, ...]) -> int:
    """Cell calls of one call of ``module``: 1 for a cell (GRUCell, LSTMCell, RNNCell); for a
    whole-sequence RNN (GRU, LSTM, RNN) its loop's length: the time steps of its input
    (packed: ``len(batch_sizes)``) x layers x directions."""
    if isinstance(module, nn.RNNCellBase):
        return 1
    assert isinstance(module, nn.RNNBase)
    x = inputs[0]
    if isinstance(x, nn.utils.rnn.PackedSequence):
        steps = len(x.batch_sizes)
    else:
        steps = x.shape[1 if module.batch_first else 0] if x.dim() == 3 else x.shape[0]
    return steps * module.num_layers * (2 if module.bidirectional else 1)


@contextmanager
def count_cell_calls(model: nn.Module) -> Iterator[list[int]]:
    """``with count_cell_calls(model) as calls:`` ... ``calls[0]``: recurrent cell
    applications made inside (forward hooks on every recurrent module of ``model``)."""
    calls = [0]

    def hook(module: nn.Module, inputs: tuple[Any, ...], output: Any) -> None:
        calls[0] += _steps_of(module, inputs)

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if isinstance(m, nn.RNNCellBase | nn.RNNBase)
    ]
    try:
        yield calls
    finally:
        for h in handles:
            h.remove()


def time_steps(
    steps: Sequence[Callable[[], object]], warmup: int, repeats: int
) -> list[list[float]]:
    """Seconds of ``repeats`` calls of each step after ``warmup`` untimed ones; at each
    repeat the steps run in turn (so a burst of load hits all of them, not one)."""
    for step in steps:
        for _ in range(warmup):
            step()
    times: list[list[float]] = [[] for _ in steps]
    gc.collect()
    for _ in range(repeats):
        for i, step in enumerate(steps):
            t0 = time.perf_counter()
            step()
            times[i].append(time.perf_counter() - t0)
    return times



__all__ = ["count_cell_calls", "graph_depth", "time_steps"]
