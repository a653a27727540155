"""``attnkit explain``: the printed numbers equal an independent computation from the printed
inputs (written here from the papers' equations, not through attnkit)."""

import math
import re

import pytest
import torch

from attnkit.cli import main
from attnkit.registry import STRIDED
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
        ("general", "local-p", "softmax", 2),  # docs/guide.md's examples
        ("dot", "strided", "softmax", 2),
    ],
)
def test_steps_are_consistent(score, align, norm, window) -> None:
    size = {"stride" if align in STRIDED else "window": window}  # a pattern's l, a window
    st = explain_steps(score, align, norm, **size, dim=3, src_tokens=list("abcde"))
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


def test_birnn_states_match_torch_rnn() -> None:
    """birnn_states against PyTorch's own bidirectional tanh RNN with the same weights."""
    from attnkit.viz.explain import birnn_states

    gen = torch.Generator().manual_seed(3)
    x = torch.randn(5, 4, generator=gen, dtype=torch.float64)  # (S, D_in)
    w_f, w_b = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64)  # (H, D_in)
    u_f, u_b = torch.randn(2, 3, 3, generator=gen, dtype=torch.float64)  # (H, H)
    rnn = torch.nn.RNN(4, 3, bias=False, bidirectional=True, batch_first=True).double()
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(w_f), rnn.weight_hh_l0.copy_(u_f)
        rnn.weight_ih_l0_reverse.copy_(w_b), rnn.weight_hh_l0_reverse.copy_(u_b)
        expected, _ = rnn(x[None])
    assert torch.allclose(birnn_states(x, w_f, u_f, w_b, u_b), expected[0], atol=1e-12)


def test_birnn_halves_read_in_their_own_direction() -> None:
    """→h_j has read x_1 … x_j only, ←h_j x_j … x_S only: changing the last token leaves the
    forward half of every earlier state unchanged and changes every backward half."""
    from attnkit.viz.explain import birnn_states, explain_steps

    a = explain_steps(src_tokens="a b c d".split(), encoder="birnn", dim=4, seed=2)
    assert a.embeddings is not None and a.encoder.shape == (4, 4)

    x = a.embeddings.clone()
    gen = torch.Generator().manual_seed(0)
    w = [torch.randn(2, 4, generator=gen, dtype=torch.float64) for _ in range(2)]
    u = [torch.randn(2, 2, generator=gen, dtype=torch.float64) for _ in range(2)]
    h = birnn_states(x, w[0], u[0], w[1], u[1])
    x[-1] += 1.0
    h2 = birnn_states(x, w[0], u[0], w[1], u[1])
    assert torch.equal(h[:-1, :2], h2[:-1, :2])  # forward halves before the edit: unchanged
    assert not torch.isclose(h[:, 2:], h2[:, 2:]).any()  # every backward half changed


def test_bahdanau_step_5_is_the_next_rnn_state(capsys) -> None:
    """s_t = tanh(W_y y_{t-1} + U_s s_{t-1} + C_s c_t) (Bahdanau 2015, eq. 4), recomputed in
    numpy from the example's own numbers; the query of steps 1–4 is s_{t-1}."""
    import numpy as np

    from attnkit.viz.explain import explain_steps

    st = explain_steps("general", src_tokens="x y z".split(), decoder="bahdanau", dim=4)
    assert st.recurrence is not None and st.prev_output is not None
    w_y, u_s, c_s = (m.numpy() for m in st.recurrence)
    expected = np.tanh(w_y @ st.prev_output.numpy() + u_s @ st.decoder_state.numpy()
                       + c_s @ st.context.numpy())  # fmt: skip
    assert np.allclose(st.attentional.numpy(), expected, atol=1e-12)
    luong = explain_steps("general", src_tokens="x y z".split(), dim=4)
    assert torch.equal(luong.context, st.context)  # steps 0–4 are the same computation
    sec = _run(capsys, "--decoder", "bahdanau", "--encoder", "birnn", "--src", "x y z")
    assert "s_t = tanh(W_y y_{t-1} + U_s s_{t-1} + C_s c_t)" in "\n".join(sec[5])
    assert "→h_j[0]" in "\n".join(sec[0]) and "←h_j[1]" in "\n".join(sec[0])


def test_birnn_needs_an_even_width() -> None:
    from attnkit.viz.explain import explain_steps

    with pytest.raises(ValueError, match="two halves; give an even dim"):
        explain_steps(encoder="birnn", dim=3)
