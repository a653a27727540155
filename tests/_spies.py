"""Spies on attend's paths: a test that expects a fast path fails if the dispatch silently
falls back to another (the reference path gives the same numbers, so only a spy can tell).

    with only_path("gather"):
        attend(q, k, v, align=LocalP(...), need_weights=False)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import attnkit.core
import attnkit.linear.dispatch
import attnkit.local.dispatch

# path -> (module whose global attend / the dispatcher calls, function name)
PATHS = {
    "sliding": (attnkit.local.dispatch, "sliding_window_attention"),  # O(n·r) band kernel
    "gather": (attnkit.local.dispatch, "attend_window"),  # local-m / local-p gathered window
    "factorised": (attnkit.local.dispatch, "factorised_attention"),  # Sparse Transformer, split
    "sdpa": (attnkit.core, "sdpa_context"),  # fused F.scaled_dot_product_attention
    "column": (attnkit.core, "column_attention"),  # few queries and keys on a CPU
    "reference": (attnkit.core, "reference_attention"),  # explicit scores and weights
    "linear": (attnkit.linear.dispatch, "linear_attention"),  # φ(Q)(φ(K)ᵀV), all keys
    "linear-causal": (attnkit.linear.dispatch, "causal_linear_attention"),  # prefix sums
    "implied": (attnkit.linear.dispatch, "implied_weights"),  # linear attention's weights
}


@contextmanager
def only_path(expected: str) -> Iterator[Counter[str]]:
    """Count the calls of every path inside the block; afterwards assert that ``expected``
    ran and no other path did."""
    assert expected in PATHS, f"unknown path {expected!r}; one of {sorted(PATHS)}"
    calls: Counter[str] = Counter()
    with pytest.MonkeyPatch.context() as mp:
        for name, (module, attr) in PATHS.items():
            real = getattr(module, attr)

            def spy(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
                calls[_name] += 1
                return _real(*args, **kwargs)

            mp.setattr(module, attr, spy)
        yield calls
    ran = {name for name, n in calls.items() if n}
    assert ran == {expected}, f"expected only the {expected} path to run, got {dict(calls)}"


def graph_has(out: Any, fragment: str, limit: int = 50) -> bool:
    """Whether the autograd graph behind ``out`` holds a node whose type name contains
    ``fragment`` (e.g. the kernel's Function or custom op): which kernel ran a fused path."""
    todo, seen = [out.grad_fn], 0
    while todo and seen < limit:
        fn, seen = todo.pop(), seen + 1
        if fn is None:
            continue
        if fragment in type(fn).__name__:
            return True
        todo.extend(f for f, _ in fn.next_functions)
    return False


def packed_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Spy on the packed-targets loss that ``training_loss`` calls (models/packed.py): the
    returned list grows by one per call, and the loss itself still runs."""
    import attnkit.models.latent as latent
    import attnkit.models.packed as packed

    calls: list[int] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return packed.packed_cross_entropy(*args, **kwargs)

    monkeypatch.setattr(latent, "packed_cross_entropy", spy)
    return calls
