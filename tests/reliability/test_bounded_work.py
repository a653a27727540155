"""Issue "Nothing lost, nothing silently wrong, nothing that hangs", section 2: bounded work.
No input makes attnkit try an allocation it cannot hold; the O(n·w) way is always named."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from _reliability import one_line_error

from attnkit import attend
from attnkit.cli import main
from attnkit.local import band_to_dense
from attnkit.stages.alignment import LocalP, SlidingWindow

N = 256  # with a tiny budget, (1, 2, 256, 256) float32 scores + weights = 1 MiB is "too much"


@pytest.fixture
def tiny_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNKIT_DENSE_BUDGET_GIB", str(0.5 / 1024))  # 0.5 MiB


def qkv(n: int = N, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, 2, n, 8, generator=g) for _ in range(3))  # type: ignore[return-value]


CASES = {
    "global weights": (dict(), r"need_weights=False \(the fused"),
    "sliding weights": (dict(align=SlidingWindow(4)), r'weights_layout="band" for a sliding'),
    "local-p weights": (dict(align=LocalP(8, 4)), r"need_weights=False"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_dense_weights_over_the_budget_are_a_clear_error(case: str, tiny_budget: None) -> None:
    kwargs, fix = CASES[case]
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"dense \(1, 2, 256, 256\) scores and weights: .* GiB, "
                       r"over the budget of .* GiB; .*" + fix):  # fmt: skip
        attend(q, k, v, **kwargs)  # type: ignore[arg-type]


def test_the_kernels_without_dense_tensors_still_run_over_the_budget(tiny_budget: None) -> None:
    q, k, v = qkv()
    ref = attend(q.double(), k.double(), v.double(), need_weights=False).context
    assert torch.allclose(attend(q, k, v, need_weights=False).context, ref.float(), atol=1e-5)
    band = attend(q, k, v, align=SlidingWindow(4), weights_layout="band")
    assert band.weights is not None and band.weights.shape == (1, 2, N, 9)


@pytest.mark.parametrize("radius,causal", [(1, False), (4, True), (7, False), (300, False)])
def test_band_weights_are_the_dense_weights_on_the_band(radius: int, causal: bool) -> None:
    q, k, v = qkv(n=40, seed=radius)
    mask = torch.rand(1, 1, 1, 40, generator=torch.Generator().manual_seed(1)) > 0.2
    align = SlidingWindow(radius, causal=causal)
    dense = attend(q, k, v, align=align, mask=mask)
    band = attend(q, k, v, align=align, mask=mask, weights_layout="band")
    assert band.weights is not None and dense.weights is not None
    width = min(radius, 39) + 1 if causal else 2 * min(radius, 39) + 1
    assert band.weights.shape[-1] == width
    back = band_to_dense(band.weights, band.extras["band_offset"], 40)
    assert torch.allclose(back, dense.weights, atol=1e-6)
    assert torch.allclose(band.context, dense.context, atol=1e-5)


def test_band_layout_needs_a_sliding_window() -> None:
    q, k, v = qkv(n=16)
    with pytest.raises(ValueError, match='weights_layout="band" needs a sliding-window'):
        attend(q, k, v, weights_layout="band")
    with pytest.raises(ValueError, match="choose 'dense' or 'band'"):
        attend(q, k, v, weights_layout="diagonal")


@pytest.mark.parametrize("raw", ["0", "-1", "nan", "lots"])
def test_a_meaningless_budget_is_refused(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNKIT_DENSE_BUDGET_GIB", raw)
    q, k, v = qkv(n=8)
    with pytest.raises(ValueError, match="ATTNKIT_DENSE_BUDGET_GIB=.*give a positive number"):
        attend(q, k, v)


class Stdin:
    """stdin as bytes, one line at a time, recording what stdout held when each was read."""

    def __init__(self, lines: list[bytes], stdout: io.StringIO) -> None:
        self.lines, self.stdout, self.seen = lines, stdout, []  # type: list[str]

    @property
    def buffer(self) -> Iterator[bytes]:
        for line in self.lines:
            self.seen.append(self.stdout.getvalue())
            yield line


def test_translate_streams_batch_by_batch(trained: Path, monkeypatch, capsys) -> None:
    """The first batch is printed before the third one is read: 1,000 sentences never make the
    user wait in silence, and input of any length runs in bounded memory."""
    out = io.StringIO()
    stdin = Stdin([b"3 4 5\n"] * 7, out)
    monkeypatch.setattr("sys.stdin", stdin)
    monkeypatch.setattr("sys.stdout", out)
    assert main(["translate", "--checkpoint", str(trained), "--batch-size", "2"]) == 0
    assert len(out.getvalue().splitlines()) == 7
    assert [s.count("\n") for s in stdin.seen] == [0, 0, 2, 2, 4, 4, 6]


CASES_TRANSLATE = {
    "a line over --max-input-len": (["--max-input-len", "8"], b"1 2\n" + b"3 " * 20 + b"\n",
                                    r"line 2 has 20 tokens, over --max-input-len 8: split it"),
    "not UTF-8": ([], b"3 4\n\xff\xfe 5\n", r"<stdin>:2: not valid UTF-8 \(byte 0xff"),
    "nothing": ([], b"\n  \n", r"nothing to translate"),
    "--batch-size 0": (["--batch-size", "0"], b"3\n", r"--batch-size 0.*must be at least 1"),
    "--max-input-len 0": (["--max-input-len", "0"], b"3\n", r"--max-input-len 0.*at least 1"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES_TRANSLATE))
def test_translate_refuses_unbounded_or_undecodable_input(
    case: str, trained: Path, monkeypatch, capsys
) -> None:
    flags, data, match = CASES_TRANSLATE[case]
    monkeypatch.setattr("sys.stdin", Stdin([*io.BytesIO(data)], io.StringIO()))
    one_line_error(capsys, ["translate", "--checkpoint", str(trained), *flags], match)


def test_translate_truncates_when_asked(trained: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdin", Stdin([b"3 " * 5000 + b"\n"], io.StringIO()))
    argv = ["translate", "--checkpoint", str(trained), "--max-input-len", "10", "--truncate"]
    assert main(argv) == 0
    assert "warning: line 1 cut to 10 of 5,000 tokens" in capsys.readouterr().err


def test_training_on_a_corpus_drops_overlong_pairs_by_default(tmp_path: Path, capsys) -> None:
    """A 200,000-word line would take gigabytes and minutes per step; by default pairs with a
    side over 200 tokens are dropped, and the count is said (a 2,000-word line shows it, in
    seconds even without the limit)."""
    tsv = tmp_path / "c.tsv"
    tsv.write_text("a b c\tc b a\n" * 60 + " ".join(["x"] * 2_000) + "\ty\n", encoding="utf-8")
    argv = ["train", "--train-tsv", str(tsv), "--preset", "tiny", "--epochs", "1",
            "--no-progress", "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 0
    assert "60 pairs kept of 61 lines; 1 pairs over --max-len 200 tokens dropped" in (
        capsys.readouterr().err
    )
