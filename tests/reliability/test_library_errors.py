"""Issue "Nothing lost and nothing silently wrong on the surfaces added since", section 13: the
library's entry points answer bad arguments with attnkit's one-line errors naming the
argument, not torch's RuntimeErrors from deep inside. Each row: a call, the error type, what
its message must say."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch

import attnkit
import attnkit.nn


def _drop_in(dtype: torch.dtype = torch.float64) -> Callable[[], object]:
    def call() -> object:
        m = attnkit.nn.MultiheadAttention(8, 2, batch_first=True)
        x = torch.zeros(2, 3, 8, dtype=dtype)
        return m(x, x, x)

    return call


def _built(dtype: torch.dtype, **kw: object) -> Callable[[], object]:
    def call() -> object:
        m = attnkit.build(dim=8, **kw)  # type: ignore[arg-type]
        x = torch.zeros(2, 3, 8, dtype=dtype)
        return m(x, x)

    return call


DTYPE = r"query is float64 but this module's weights are float32; .*module\.to\(torch\.float64\)"
CASES: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
    "build dim=-4": (lambda: attnkit.build("additive", dim=-4), ValueError, r"^dim=-4; a width"),
    "build dim=0": (lambda: attnkit.build(dim=0, heads=1), ValueError, r"^dim=0; a width"),
    "build dim=2.5": (lambda: attnkit.build(dim=2.5), TypeError, r"^dim must be an int"),  # type: ignore[arg-type]
    "build key_dim=-1": (
        lambda: attnkit.build("general", dim=8, key_dim=-1), ValueError, r"^key_dim=-1"
    ),
    "build hidden=0": (lambda: attnkit.build("additive", dim=8, hidden=0), ValueError, r"hidden=0"),
    "float64 into the drop-in MHA": (_drop_in(), ValueError, DTYPE),
    "float64 into a multi-head module": (_built(torch.float64, heads=2), ValueError, DTYPE),
    "float64 into a single-head additive": (
        _built(torch.float64, score="additive"), ValueError, DTYPE
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_argument_is_attnkits_one_line_error(case: str) -> None:
    call, kind, match = CASES[case]
    with pytest.raises(kind) as info:
        call()
    assert type(info.value) is kind  # not torch's RuntimeError from inside a matmul
    message = str(info.value)
    assert "\n" not in message and re.search(match, message), message


def test_an_empty_query_gives_an_empty_answer_as_torch_does() -> None:
    """Zero queries is a valid input: (0, B, E) out, as ``torch.nn.MultiheadAttention``."""
    torch.manual_seed(0)
    ours = attnkit.nn.MultiheadAttention(8, 2)
    theirs = torch.nn.MultiheadAttention(8, 2)
    q, kv = torch.zeros(0, 2, 8), torch.randn(3, 2, 8)
    out, weights = ours(q, kv, kv)
    want, want_weights = theirs(q, kv, kv)
    assert out.shape == want.shape == (0, 2, 8)
    assert weights is not None and want_weights is not None
    assert weights.shape == want_weights.shape == (2, 0, 3)


def test_matching_dtypes_and_autocast_still_run() -> None:
    """The dtype check refuses only a real mismatch: float64 modules take float64, and under
    autocast a float32 module takes what autocast hands it."""
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    m = attnkit.build(dim=8, heads=2).double()
    assert m(x, x).context.dtype == torch.float64
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = attnkit.build(dim=8, heads=2)(x.float(), x.float())
    assert y.context.shape == (2, 3, 8)
