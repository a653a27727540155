"""A simple attention heatmap with the tokens on its axes (Hangul rendered through
koreanize_matplotlib's font)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from torch import Tensor


def attention_heatmap(
    weights: Tensor | np.ndarray,
    src: Sequence[str],
    tgt: Sequence[str],
    path: str | Path,
    title: str = "",
) -> Path:
    """weights (T, S): row i = attention of output token tgt[i] over source tokens src.
    Writes a PNG to ``path`` and returns it."""
    import matplotlib

    matplotlib.use("Agg")
    with warnings.catch_warnings():  # it uses distutils' LooseVersion
        warnings.simplefilter("ignore", DeprecationWarning)
        import koreanize_matplotlib  # noqa: F401  (registers a Hangul font)
    import matplotlib.pyplot as plt

    w = np.asarray(weights.detach().cpu() if isinstance(weights, Tensor) else weights, float)
    if w.shape != (len(tgt), len(src)):
        raise ValueError(
            f"weights {w.shape} do not match {len(tgt)} target x {len(src)} source tokens"
        )
    fig, ax = plt.subplots(figsize=(1.0 + 0.6 * len(src), 1.0 + 0.5 * len(tgt)))
    im = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(src)), list(src), rotation=45, ha="right")
    ax.set_yticks(range(len(tgt)), list(tgt))
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if title:
        ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["attention_heatmap"]
