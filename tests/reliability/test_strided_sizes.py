"""The Sparse Transformer's patterns at sizes a user can type: a stride far over n runs in the
memory of n (it once padded n to a multiple of the stride: 24 TB asked for at n = 64 and a
stride of 10^6), with the same result as the dense pattern; a stride that is not a whole
number is refused when the pattern is built; an input that is a view with strides of its
own runs on every path.

Legend: B batch, H heads, n positions, D width, l stride.
"""

from __future__ import annotations

import pytest
import torch

import attnkit
from attnkit import attend
from attnkit.registry import ALIGNMENTS, build_alignment
from attnkit.stages.sparse import PATTERNS, PatternSpec

pytestmark = pytest.mark.usefixtures("one_thread_module")

B, H, N, D = 1, 2, 24, 8
NAMES = sorted(name for name in ALIGNMENTS if name.startswith(PATTERNS))


@pytest.mark.parametrize("stride", [N - 1, N, N + 1, N + 2, 10**6])
@pytest.mark.parametrize("name", NAMES)
def test_a_stride_over_n_is_the_dense_pattern_in_the_memory_of_n(name, stride):
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64) for _ in range(3))
    align = build_alignment(name, D, stride=stride)
    fast = attend(q, k, v, align=align, need_weights=False).context  # the factorised kernel
    dense = attend(q, k, v, align=align).context  # the (n, n) mask of the pattern's sets
    torch.testing.assert_close(fast, dense)


@pytest.mark.parametrize("stride", [1.5, True, 4.0, "4", None])
def test_a_stride_that_is_no_whole_number_is_refused_when_built(stride):
    with pytest.raises((TypeError, ValueError), match=r"stride"):
        build_alignment("strided", D, stride=stride)
    with pytest.raises((TypeError, ValueError), match=r"stride"):
        attnkit.build(dim=8, heads=2, align="strided-causal-heads", stride=stride)


def test_a_numpy_integer_stride_is_a_stride():
    import numpy as np

    assert PatternSpec("strided", np.int64(4)).stride == 4  # type: ignore[arg-type]
    assert type(PatternSpec("strided", np.int64(4)).stride) is int  # type: ignore[arg-type]


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_a_view_with_its_own_strides_runs_on_every_pattern(name, grad):
    """A transposed view (unit stride along n, not along D) is copied where the banded
    kernel reads memory in place; it once raised the kernel's "unit stride along D"."""
    torch.manual_seed(0)
    base = [torch.randn(B, H, D, N) for _ in range(3)]  # (B, H, D, n)
    views = [x.transpose(-1, -2).requires_grad_(grad) for x in base]  # (B, H, n, D) views
    plain = [x.transpose(-1, -2).contiguous().requires_grad_(grad) for x in base]
    align = build_alignment(name, D, stride=5)
    got = attend(*views, align=align, need_weights=False).context
    want = attend(*plain, align=align, need_weights=False).context
    torch.testing.assert_close(got, want)
    if grad:
        got.square().sum().backward()
        want.square().sum().backward()
        for a, b in zip(views, plain, strict=True):
            torch.testing.assert_close(a.grad, b.grad)
