"""attnkit.interop.hf_attention (HF's attention convention on attnkit's core) against an eager
reference written here in float64 from the equations, and HF's own mask formulas. Needs no
``transformers``; tests/interop/test_hf.py runs the real models."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from _spies import only_path

from attnkit.interop.hf_attention import convert_mask, hf_attend, sliding_radius
from attnkit.stages.normalisers import Entmax15, Sparsemax, softmax

pytestmark = pytest.mark.usefixtures("one_thread_module")


def sparsemax_ref(z: torch.Tensor) -> torch.Tensor:
    """Martins & Astudillo 2016, Alg. 1: sort, k(z) = max{k : 1 + k z_(k) > Σ_{j<=k} z_(j)}."""
    zs, _ = z.sort(dim=-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    cums = zs.cumsum(-1)
    support = (1 + k * zs > cums).sum(-1, keepdim=True)  # (..., 1)
    tau = (cums.gather(-1, support - 1) - 1) / support
    return (z - tau).clamp(min=0)


def entmax15_ref(z: torch.Tensor) -> torch.Tensor:
    """Peters et al. 2019: p = [z/2 - τ]₊², τ found by bisection so that Σp = 1."""
    x = z / 2
    lo, hi = x.amax(-1, keepdim=True) - 1, x.amax(-1, keepdim=True)
    for _ in range(200):
        mid = (lo + hi) / 2
        over = ((x - mid).clamp(min=0) ** 2).sum(-1, keepdim=True) > 1
        lo, hi = torch.where(over, mid, lo), torch.where(over, hi, mid)
    return (x - (lo + hi) / 2).clamp(min=0) ** 2


REFS = {"softmax": lambda s: torch.softmax(s, -1), "sparsemax": sparsemax_ref,
        "entmax15": entmax15_ref}  # fmt: skip
NORMS = {"softmax": softmax, "sparsemax": Sparsemax(), "entmax15": Entmax15()}


def eager(q, k, v, allowed, bias, scale, norm):
    """softmax-like(s·q kᵀ + bias) v in float64 with GQA by repeat_interleave; masked scores
    far below every allowed one (a -1e9 additive term)."""
    q, k, v = q.double(), k.double(), v.double()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)  # (B, H, Tk, .)
    s = q @ k.transpose(-1, -2) * scale + bias  # (B, H, Tq, Tk)
    w = REFS[norm](torch.where(allowed, s, s - 1e9))
    return (w @ v).transpose(1, 2), w  # (B, Tq, H, Dv), (B, H, Tq, Tk)


def qkv(b=2, h=4, hkv=2, tq=7, tk=7, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, tq, d, generator=g), torch.randn(b, hkv, tk, d, generator=g),
            torch.randn(b, hkv, tk, 5, generator=g))  # fmt: skip


def padding(b: int, tk: int) -> torch.Tensor:
    """(B, 1, 1, Tk): the last key of sample 1 is padding."""
    m = torch.ones(b, 1, 1, tk, dtype=torch.bool)
    m[1, ..., -1] = False
    return m


@pytest.mark.parametrize("norm", sorted(NORMS))
@pytest.mark.parametrize("kind", ["causal", "bool", "float", "float-bias"])
@pytest.mark.parametrize("heads", [(4, 2), (2, 2)])
def test_matches_eager_reference(norm: str, kind: str, heads: tuple[int, int]) -> None:
    q, k, v = qkv(h=heads[0], hkv=heads[1])
    tq = tk = q.shape[2]
    causal = torch.ones(tq, tk, dtype=torch.bool).tril()
    allowed = causal & padding(2, tk)  # (B, 1, Tq, Tk)
    bias = torch.zeros(())
    if kind == "causal":
        mask, allowed = None, causal
    elif kind == "bool":
        mask = allowed
    else:  # HF's eager convention: 0 attend, min masked (+ a bias)
        extra = torch.randn(2, 1, tq, tk) if kind == "float-bias" else torch.zeros(2, 1, tq, tk)
        mask = torch.where(allowed, extra, torch.finfo(torch.float32).min)
        bias = extra.double()
    out, w = hf_attend(q, k, v, mask, scaling=0.3, normaliser=NORMS[norm], need_weights=True)
    ref_out, ref_w = eager(q, k, v, allowed, bias, 0.3, norm)
    assert out.shape == (2, tq, heads[0], 5) and w is not None
    torch.testing.assert_close(out.double(), ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w.double(), ref_w, atol=1e-5, rtol=1e-5)
    assert bool((w[~allowed.expand_as(w)] == 0).all())  # masked keys get exactly zero
    out2, none = hf_attend(q, k, v, mask, scaling=0.3, normaliser=NORMS[norm])
    assert none is None
    torch.testing.assert_close(out2, out, atol=1e-5, rtol=1e-5)


def test_convert_mask() -> None:
    lo = torch.finfo(torch.float32).min
    m = torch.tensor([[0.0, lo, -float("inf"), 0.5]])
    mask, bias = convert_mask(m)
    assert mask is not None and bias is not None
    assert mask.tolist() == [[True, False, False, True]]
    assert bias.tolist() == [[0.0, 0.0, 0.0, 0.5]]
    mask, bias = convert_mask(torch.tensor([[0.0, lo]]))
    assert mask is not None and mask.tolist() == [[True, False]] and bias is None
    b = torch.tensor([[True, False]])
    assert convert_mask(b) == (b, None)
    assert convert_mask(None) == (None, None)
    with pytest.raises(TypeError, match="bool mask"):
        convert_mask(torch.tensor([[1, 0]]))


def hf_band(tq: int, tk: int, window: int, causal: bool) -> torch.Tensor:
    """HF masking_utils' formulas: causal ``kv > q - W and kv <= q``; bidirectional
    ``|q - kv| <= W``; queries at the last Tq key positions."""
    qi = torch.arange(tk - tq, tk)[:, None]
    kv = torch.arange(tk)[None, :]
    return (kv > qi - window) & (kv <= qi) if causal else (qi - kv).abs() <= window


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("window", [1, 2, 5, 40])
def test_sliding_matches_hf_band(causal: bool, window: int) -> None:
    q, k, v = qkv(tq=11, tk=11)
    pad = padding(2, 11)
    allowed = hf_band(11, 11, window, causal) & pad
    with only_path("sliding"):  # the O(n·r) kernel, no dense (Tq, Tk) scores
        out, _ = hf_attend(q, k, v, pad, scaling=0.3, causal=causal, sliding_window=window)
    out_w, w = hf_attend(q, k, v, pad, scaling=0.3, causal=causal, sliding_window=window,
                         need_weights=True)  # fmt: skip
    ref_out, ref_w = eager(q, k, v, allowed, torch.zeros(()), 0.3, "softmax")
    # a query with no allowed key (window 1 on a padded key) gets a zero context and weights
    live = allowed.expand(2, 4, 11, 11).any(-1)  # (B, H, Tq)
    ref_out = torch.where(live.transpose(1, 2)[..., None], ref_out, 0.0)
    ref_w = torch.where(live[..., None], ref_w, 0.0)
    torch.testing.assert_close(out.double(), ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_w.double(), ref_out, atol=1e-5, rtol=1e-5)
    assert w is not None
    torch.testing.assert_close(w.double(), ref_w, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("tq", [1, 3])
def test_sliding_decoding_rows_are_the_last_rows(tq: int) -> None:
    """With a KV cache the new queries are the last Tq positions: same rows as a full pass."""
    q, k, v = qkv(tq=9, tk=9)
    full, _ = hf_attend(q, k, v, None, scaling=0.3, sliding_window=3)
    step, _ = hf_attend(q[:, :, -tq:], k, v, None, scaling=0.3, sliding_window=3)
    torch.testing.assert_close(step, full[:, -tq:], atol=1e-6, rtol=1e-6)


def test_dropout_drops_the_returned_weights() -> None:
    """As HF's eager attention: weights after dropout are returned and reduce the values."""
    q, k, v = qkv()
    _, w0 = hf_attend(q, k, v, None, need_weights=True)
    torch.manual_seed(1)
    out, w = hf_attend(q, k, v, None, dropout=0.5, need_weights=True)
    assert w is not None and w0 is not None
    dropped = w == 0
    assert 0.2 < float((dropped & (w0 > 0)).sum() / (w0 > 0).sum()) < 0.8
    torch.testing.assert_close(w[~dropped], 2 * w0[~dropped])
    ref = (w @ v.repeat_interleave(2, 1)).transpose(1, 2)
    torch.testing.assert_close(out, ref)


def test_bad_arguments_say_what_to_do() -> None:
    q, k, v = qkv(h=3, hkv=2)
    with pytest.raises(ValueError, match="not a multiple"):
        hf_attend(q, k, v, None)
    q, k, v = qkv()
    with pytest.raises(ValueError, match="dropout"):
        hf_attend(q, k, v, None, dropout=1.0)
    with pytest.raises(ValueError, match=">= 1"):
        hf_attend(q, k, v, None, sliding_window=0)
    assert sliding_radius(4, causal=True) == 3 and sliding_radius(4, causal=False) == 4


def test_import_attnkit_and_cli_help_do_not_import_transformers() -> None:
    code = (
        "import sys, contextlib, io\n"
        "import attnkit, attnkit.interop.hf_attention\n"
        "from attnkit.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert out.stdout.strip() == "False"
