"""``attend(..., need_weights=False)`` routes each alignment and score to the kernel their
declared capabilities allow (a spy proves which path ran: the reference path would give the
same numbers), and the fast result equals the reference path (need_weights=True)."""

import ast
from pathlib import Path

import pytest
import torch
from _spies import only_path

import attnkit
from attnkit.core import attend
from attnkit.masks import window_mask
from attnkit.stages.alignment import Alignment, AlignSpec, KeyWindow, dense_spec

pytestmark = pytest.mark.usefixtures("one_thread")

D = 8


def _qkv(tq: int = 33, tk: int = 33):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 2, tq, D, generator=g, dtype=torch.float64)
    k = torch.randn(2, 2, tk, D, generator=g, dtype=torch.float64)
    v = torch.randn(2, 2, tk, 5, generator=g, dtype=torch.float64)
    return q, k, v


def _pair(path: str, positions=None, tq: int = 33, **kw):  # type: ignore[no-untyped-def]
    """The fast result (spied: only ``path`` may run) and the reference result."""
    q, k, v = _qkv(tq)
    mask = attnkit.padding_mask(torch.tensor([33, 20]))[:, None]  # (B, 1, 1, Tk)
    with only_path(path):
        fast = attend(q, k, v, mask=mask, positions=positions, need_weights=False, **kw)
    with only_path("reference"):
        ref = attend(q, k, v, mask=mask, positions=positions, need_weights=True, **kw)
    assert ref.weights is not None
    assert (fast.weights is None) == (path != "reference")  # the reference path gives weights
    torch.testing.assert_close(fast.context, ref.context)
    assert fast.extras.keys() == ref.extras.keys()
    if "position" in ref.extras:
        torch.testing.assert_close(fast.extras["position"], ref.extras["position"])
    return fast, ref


def _local_p():  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    return attnkit.LocalP(D, 3).double()


CASES = {
    # every fast path, and the stages that must keep the reference semantics
    "sliding": lambda: dict(align=attnkit.SlidingWindow(3)),
    "sliding-causal": lambda: dict(align=attnkit.SlidingWindow(5, causal=True)),
    "local-m/sdpa": lambda: dict(align=attnkit.LocalM(4)),
    "local-m/dot": lambda: dict(align=attnkit.LocalM(2), score=attnkit.DotScore()),
    "local-m/general": lambda: dict(align=attnkit.LocalM(2), score=_general()),
    "local-m/sparsemax": lambda: dict(align=attnkit.LocalM(2), normaliser=attnkit.Sparsemax()),
    "local-p": lambda: dict(align=_local_p()),
    "local-p/additive": lambda: dict(align=_local_p(), score=_additive()),
    "local-p/cosine": lambda: dict(align=_local_p(), score=attnkit.CosineScore(3.0)),
    "global": lambda: dict(),
    "causal": lambda: dict(align=attnkit.CausalAlignment()),
    "global/scale": lambda: dict(score=attnkit.ScaledDotScore(0.5)),
    "local-p/location": lambda: dict(align=_local_p(), score=_location()),
    "sliding/general": lambda: dict(align=attnkit.SlidingWindow(2), score=_general()),
    "local-m/dropout": lambda: dict(
        align=attnkit.LocalM(2), reduce=attnkit.modules.DropoutReduce(torch.nn.Dropout(0.0))
    ),
}
EXPECTED = {
    "sliding": "sliding",
    "sliding-causal": "sliding",
    "local-m/sdpa": "sliding",
    "local-m/dot": "gather",
    "local-m/general": "gather",
    "local-m/sparsemax": "gather",
    "local-p": "gather",
    "local-p/additive": "gather",
    "local-p/cosine": "gather",
    "global": "sdpa",
    "causal": "sdpa",
    "global/scale": "reference",  # a scale other than 1/√d is not what SDPA computes
    "local-p/location": "reference",  # the location score cannot score a gathered window
    "sliding/general": "reference",  # SlidingWindow declares no key window
    "local-m/dropout": "reference",  # not a plain weighted sum
}


def _general():  # type: ignore[no-untyped-def]
    torch.manual_seed(1)
    return attnkit.GeneralScore(D).double()


def _additive():  # type: ignore[no-untyped-def]
    torch.manual_seed(2)
    return attnkit.AdditiveScore(D, hidden=6).double()


def _location():  # type: ignore[no-untyped-def]
    torch.manual_seed(3)
    return attnkit.LocationScore(D, 33).double()


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_stage_goes_to_its_path_and_equals_the_reference(case: str) -> None:
    _pair(EXPECTED[case], **CASES[case]())


@pytest.mark.parametrize(
    "align,path",
    [
        (lambda: attnkit.LocalM(3), "gather"),  # p_t = the given step
        (lambda: attnkit.SlidingWindow(3), "sdpa"),  # dense band around the positions, fused
        (lambda: attnkit.SlidingWindow(3, causal=True), "sdpa"),
        (lambda: attnkit.CausalAlignment(), "sdpa"),
        (_local_p, "gather"),  # p_t ignores the positions
    ],
    ids=["local-m", "sliding", "sliding-causal", "causal", "local-p"],
)
def test_positions_take_the_fast_paths_too(align, path) -> None:  # type: ignore[no-untyped-def]
    positions = torch.tensor([[4, 30, 0], [17, 17, 40]])  # (B, Tq): one decoder step per row
    _pair(path, positions=positions[:, None], tq=3, align=align())


def test_local_m_at_real_positions_gathers_one_key_more() -> None:
    positions = torch.tensor([2.5, 0.25, 31.75])  # (Tq,) p_t between keys: 2D + 2 keys
    fast, _ = _pair("gather", positions=positions, tq=3, align=attnkit.LocalM(2))
    torch.testing.assert_close(fast.extras["position"], positions.double())


class LookAhead(Alignment):
    """A new alignment, unknown to the dispatcher: query t sees keys t+1 .. t+2 only. It
    declares its key window, so it must get the gathered kernel."""

    def key_window(self, query, keys, mask=None, positions=None):  # type: ignore[no-untyped-def]
        at = torch.arange(query.shape[-2]) if positions is None else positions
        position = at.to(query.dtype)  # (Tq,)

        def admit(s: torch.Tensor):  # type: ignore[no-untyped-def]
            return window_mask(position + 1.5, s, 0.5), None  # |s - (t + 1.5)| <= 0.5

        return KeyWindow(at.long() + 1, 2, position, admit)

    def forward(self, query, keys, mask=None, positions=None) -> AlignSpec:  # type: ignore[no-untyped-def]
        return dense_spec(self.key_window(query, keys, mask, positions), keys.shape[-2], mask)


class Doubled(attnkit.Score):
    """A new score, unknown to the dispatcher: 2 qᵀk; it declares it broadcasts."""

    gatherable = True

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return 2 * query @ keys.transpose(-2, -1)  # (..., Tq, Tk)


def test_a_new_stage_that_declares_a_capability_gets_the_fast_path() -> None:
    _, ref = _pair("gather", align=LookAhead(), score=Doubled())
    assert ref.weights is not None
    t, s = torch.arange(33)[:, None], torch.arange(33)[None, :]
    outside = (s <= t) | (s > t + 2)  # (Tq, Tk), built independently of the alignment
    assert (ref.weights[..., outside] == 0).all()


def test_a_three_argument_alignment_still_works() -> None:
    q, k, v = _qkv(5, 6)

    def first_two(query, keys, mask):  # type: ignore[no-untyped-def]
        return AlignSpec((torch.arange(keys.shape[-2]) < 2)[None])  # the old signature (1, Tk)

    with only_path("sdpa"):
        out = attend(q, k, v, align=first_two, need_weights=False)
    torch.testing.assert_close(out.context, attend(q, k[..., :2, :], v[..., :2, :]).context)


def test_local_and_capabilities_never_import_core() -> None:
    """core imports the dispatcher; nothing the dispatcher imports may import core back."""
    src = Path(attnkit.__file__).parent
    stages = [src / "stages" / "capabilities.py", src / "stages" / "reduction.py"]
    files = [*sorted((src / "local").glob("*.py")), *stages]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").endswith("core"), f"{path.name} imports core"


def test_a_normaliser_that_declares_plain_softmax_gets_the_fused_path() -> None:
    """Capabilities, not classes: a new softmax callable that says so is fused; one that does
    not (or a temperature) takes the reference path; both equal the reference."""
    q, k, v = _qkv(5, 6)

    class MySoftmax:
        plain_softmax = True

        def __call__(self, scores, mask=None):  # type: ignore[no-untyped-def]
            return attnkit.masked_softmax(scores, mask)

    ref = attend(q, k, v).context
    with only_path("sdpa"):
        fused = attend(q, k, v, normaliser=MySoftmax(), need_weights=False).context
    with only_path("reference"):
        warm = attend(q, k, v, normaliser=attnkit.Softmax(2.0), need_weights=False).context
    torch.testing.assert_close(fused, ref)
    torch.testing.assert_close(warm, attend(q, k, v, normaliser=attnkit.Softmax(2.0)).context)
