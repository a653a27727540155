"""The explainer as an animated GIF: one frame per step, each frame adding its panel
(encoder states → scores → weights → weighted states → context → decoder input).
Written with matplotlib's PillowWriter (pillow ships with matplotlib).

Legend: S source length, D width of the states.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.animation import FuncAnimation, PillowWriter
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .explain import ExplainSteps
from .explain_render import step_tables
from .fonts import font_rc


def _matrix(ax: Any, mat: np.ndarray, rows: list[str], title: str, cmap: str = "RdBu_r") -> None:
    lim = max(float(np.abs(mat).max()), 1e-9)
    ax.imshow(mat, cmap=cmap, vmin=-lim, vmax=lim, aspect="auto")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xticks(range(mat.shape[1]), [str(k) for k in range(mat.shape[1])])
    for (i, j), v in np.ndenumerate(mat):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
    ax.set_title(title, fontsize=9)


def _bars(
    ax: Any, values: np.ndarray, tokens: list[str], title: str, colour: str, allowed: np.ndarray
) -> None:
    """Horizontal bars; keys the alignment leaves out are pale."""
    colours = [colour if ok else "#dddddd" for ok in allowed]
    ax.barh(range(len(tokens)), values, color=colours)
    ax.set_yticks(range(len(tokens)), tokens)
    ax.invert_yaxis()
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.2f}", va="center", fontsize=7)
    ax.set_title(title, fontsize=9)


def _draw(fig: Figure, st: ExplainSteps, step: int) -> None:
    """Frame ``step``: the panels of steps 0 … step, the current step's formula on top."""
    fig.clear()
    tables = step_tables(st)
    fig.suptitle(f"{tables[step].title}\n{tables[step].formula}", fontsize=10)
    axes = fig.subplots(1, 5)
    tokens = [f"{j} {t}" for j, t in enumerate(st.src_tokens)]
    enc = st.encoder.numpy()  # (S, D)
    _matrix(axes[0], np.vstack([enc, st.decoder_state.numpy()[None]]), [*tokens, "h_t"], "h_j")
    if step >= 1:
        _bars(axes[1], st.scores.numpy(), tokens, "scores e_j", "grey", st.allowed.numpy())
    if step >= 2:
        _bars(axes[2], st.weights.numpy(), tokens, "weights a_j", "tab:blue", st.allowed.numpy())
    if step >= 3:
        _matrix(axes[3], st.weighted.numpy(), tokens, "a_j · h_j")
    if step >= 4:
        last = [st.context.numpy()] + ([st.attentional.numpy()] if step >= 5 else [])
        _matrix(axes[4], np.vstack(last), ["c_t", "h̃_t"][: len(last)], "context → decoder")
    for ax in axes[step + 1 :]:
        ax.set_axis_off()


def write_gif(path: str | Path, st: ExplainSteps, *, fps: int = 1, dpi: int = 80) -> Path:
    """Write the six-frame animation to ``path`` (.gif), ``fps`` frames (steps) a second."""
    out = Path(path)
    with matplotlib.rc_context(font_rc()):
        fig = Figure(figsize=(15, 4.2), dpi=dpi, layout="constrained")
        FigureCanvasAgg(fig)
        anim = FuncAnimation(fig, lambda k: _draw(fig, st, k), frames=6, blit=False)
        anim.save(str(out), writer=PillowWriter(fps=fps))
    return out


__all__ = ["write_gif"]
