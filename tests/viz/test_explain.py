"""``attnkit explain``: the printed numbers equal an independent computation from the printed
inputs (written here from the papers' equations, not through attnkit)."""

import math
import re

import pytest
import torch

from attnkit.cli import main
from attnkit.viz.explain import explain_steps

NUM = re.compile(r"-?\d+\.\d{4}")


def _sections(text: str) -> dict[int, list[str]]:
    """Printed output -> {step: its lines}; a step starts at a line '(k) ...'."""
    out: dict[int, list[str]] = {}
    step = None
    for line in text.splitlines():
        m = re.match(r"\((\d)\) ", line)
        if m:
            step = int(m.group(1))
            out[step] = []
        elif step is not None:
            out[step].append(line)
    return out


def _rows(lines: list[str], first: str) -> list[list[float]]:
    """The numbers of every table row whose first cell matches ``first`` (a regex)."""
    return [
        [float(x) for x in NUM.findall(line)]
        for line in lines
        if re.match(rf"\s*{first}\s", line) and NUM.search(line)
    ]


def _run(capsys, *argv: str) -> dict[int, list[str]]:
    assert main(["explain", *argv]) == 0
    return _sections(capsys.readouterr().out)


def test_dot_softmax_numbers_match_the_equations(capsys) -> None:
    sec = _run(capsys, "--score", "dot", "--src", "a b c d", "--dim", "3", "--seed", "1")
    enc = torch.tensor(_rows(sec[0], r"\d"), dtype=torch.float64)  # (S, D) from step 0
    (h_t,) = _rows(sec[0], "t")
    h_t_vec = torch.tensor(h_t, dtype=torch.float64)  # (D,)
    assert enc.shape == (4, 3)
    scores = torch.tensor([r[0] for r in _rows(sec[1], r"\d")], dtype=torch.float64)
    assert torch.allclose(scores, enc @ h_t_vec, atol=1e-4)  # Luong eq. 8, dot
    weights = torch.tensor([r[1] for r in _rows(sec[2], r"\d")], dtype=torch.float64)
    expected = torch.exp(scores) / torch.exp(scores).sum()  # Bahdanau eq. 6
    assert torch.allclose(weights, expected, atol=1e-4)
    weighted = torch.tensor([r[1:] for r in _rows(sec[3], r"\d")], dtype=torch.float64)
    assert torch.allclose(weighted, weights[:, None] * enc, atol=2e-4)
    (context,) = _rows(sec[4], "c_t")
    assert torch.allclose(torch.tensor(context, dtype=torch.float64), weights @ enc, atol=1e-3)


def test_additive_local_p_prior_and_context(capsys) -> None:
    sec = _run(capsys, "--score", "additive", "--align", "local-p", "--window", "2")
    enc = torch.tensor(_rows(sec[0], r"\d"), dtype=torch.float64)  # (6, 4)
    rows = _rows(sec[2], r"\d")  # e_j, softmax_j, prior_j, a_j
    p_t = float(re.search(r"p_t = (-?\d+\.\d+)", "\n".join(sec[1])).group(1))
    allowed = [("yes" in line) for line in sec[1] if re.match(r"\s*\d\s", line)]
    scores = torch.tensor([r[0] for r in rows], dtype=torch.float64)
    j = torch.arange(6, dtype=torch.float64)
    inside = torch.tensor(allowed) & ((j - p_t).abs() <= 2)
    assert inside.tolist() == allowed  # the window is [p_t - D, p_t + D] (Luong eq. 10)
    sm = torch.where(inside, torch.exp(scores), 0.0)
    sm = sm / sm.sum()
    prior = torch.exp(-((j - p_t) ** 2) / (2 * (2 / 2) ** 2))  # σ = D / 2
    weights = torch.tensor([r[3] for r in rows], dtype=torch.float64)
    assert torch.allclose(torch.tensor([r[1] for r in rows], dtype=torch.float64), sm, atol=1e-4)
    assert torch.allclose(torch.tensor([r[2] for r in rows], dtype=torch.float64), prior, atol=1e-4)
    assert torch.allclose(weights, sm * prior, atol=1e-4)
    (context,) = _rows(sec[4], "c_t")
    assert torch.allclose(torch.tensor(context, dtype=torch.float64), weights @ enc, atol=1e-3)


@pytest.mark.parametrize(
    ("score", "align", "norm", "window"),
    [
        ("scaled_dot", "causal", "softmax", None),
        ("general", "local-m", "sparsemax", 1),
        ("cosine", "sliding", "entmax15", 1),
        ("location", "global", "softmax", None),
    ],
)
def test_steps_are_consistent(score, align, norm, window) -> None:
    st = explain_steps(score, align, norm, window=window, dim=3, src_tokens=list("abcde"))
    assert torch.equal(
        st.weights[~st.allowed], torch.zeros(int((~st.allowed).sum()), dtype=torch.float64)
    )
    assert torch.allclose(st.weighted.sum(0), st.context)
    assert torch.allclose(st.weights @ st.encoder, st.context)
    expected = torch.tanh(st.w_c @ torch.cat([st.context, st.decoder_state]))
    assert torch.allclose(st.attentional, expected)
    if st.prior is None:
        assert math.isclose(float(st.weights.sum()), 1.0, rel_tol=1e-9)


def test_clear_errors(capsys) -> None:
    assert main(["explain", "--align", "local-p"]) == 2
    assert "--window" in capsys.readouterr().err
    assert main(["explain", "--score", "nope"]) == 2
    assert "choose one of" in capsys.readouterr().err


def test_gif_and_html_stepper(tmp_path, capsys) -> None:
    gif, html = tmp_path / "steps.gif", tmp_path / "steps.html"
    argv = ["--src", "a b c", "--dim", "2", "--html", str(html), "--gif", str(gif)]
    sec = _run(capsys, *argv)
    from PIL import Image

    with Image.open(gif) as im:
        assert im.n_frames == 6
    text = html.read_text(encoding="utf-8")
    (context,) = _rows(sec[4], "c_t")
    assert all(f'"{x:.4f}"' in text for x in context)  # the page shows the printed numbers
