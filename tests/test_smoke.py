"""The package imports, the CLI answers, and the public example in the README runs."""

import torch

import attnkit
from attnkit.cli import main


def test_readme_example_runs() -> None:
    torch.manual_seed(0)
    attn = attnkit.build("additive", dim=32, align="local-p", window=4, heads=4)
    x = torch.randn(2, 10, 32)  # (B, T, D)
    out = attn(x, mask=attnkit.padding_mask(torch.tensor([10, 7])))
    assert out.context.shape == (2, 10, 32)
    assert out.weights is not None and out.weights.shape == (2, 4, 10, 10)
    assert torch.isfinite(out.context).all()
    # padded keys (positions 7..9 of the second sequence) get exactly zero weight
    assert (out.weights[1, :, :, 7:] == 0).all()


def test_cli_info_lists_variants(capsys) -> None:
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    for name in ("additive", "local-p", "sparsemax", "entmax15", "sliding"):
        assert name in text
