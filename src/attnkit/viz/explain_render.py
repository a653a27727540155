"""The explainer's steps as tables: printed with ``rich`` in the terminal, or written as a
self-contained HTML stepper (Prev / Next, arrow keys). Both show the same ``StepTable``s, so
the numbers on screen and on the page are the same strings.

Legend: S source length, D width of the states.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from torch import Tensor

from ._html import write_html
from ._page_fonts import page_font_css
from .explain import ExplainSteps
from .page import CSP, embed_json


@dataclass
class StepTable:
    """One step: its title, the formula it applies, a note, and a table of strings."""

    title: str
    formula: str
    note: str
    columns: list[str]
    rows: list[list[str]]


def _num(x: float) -> str:
    text = f"{x:.4f}"
    return "0.0000" if text == "-0.0000" else text


def _vec(v: Tensor) -> list[str]:
    return [_num(float(x)) for x in v]


def _dims(d: int, name: str) -> list[str]:
    return [f"{name}[{k}]" for k in range(d)]


def header(st: ExplainSteps) -> list[str]:
    """Lines naming the chosen variant and its formulas."""
    align = f"{st.align}: {st.align_formula}" if st.align_formula else st.align
    if st.window is not None:
        align += f",  window D = {st.window}"
    if st.stride is not None:
        align += f",  stride l = {st.stride}"
    return [
        f"score       {st.score}: {st.score_formula}",
        f"alignment   {align}",
        f"normaliser  {st.normaliser}: {st.normaliser_formula}",
        f"example     S = {len(st.src_tokens)} source tokens, states of width "
        f"{st.encoder.shape[1]}, decoder step t = {st.target_step}",
    ]


def _encoder_table(st: ExplainSteps) -> StepTable:
    """Step (0): the encoder states (as random numbers, or a BiRNN's two halves) and h_t."""
    d, tok = st.encoder.shape[1], st.src_tokens
    query = "s_{t-1} (decoder)" if st.decoder_kind == "bahdanau" else "h_t (decoder)"
    if st.embeddings is None:
        return StepTable(
            "(0) encoder hidden states",
            "h_j = encoder(x_j), j = 1 … S;  h_t = decoder state at step t",
            "one vector per source token (seeded random, one decimal, to follow by hand); "
            "the decoder state h_t is the query",
            ["j", "token", *_dims(d, "h_j")],
            [[str(j), tok[j], *_vec(st.encoder[j])] for j in range(len(tok))]
            + [["t", query, *_vec(st.decoder_state)]],
        )
    half = d // 2
    return StepTable(
        "(0) encoder hidden states: a bidirectional RNN",
        "h_j = [→h_j ; ←h_j],  →h_j = tanh(W_f x_j + U_f →h_{j-1}),  "
        "←h_j = tanh(W_b x_j + U_b ←h_{j+1})   (Bahdanau 2015, §3.2)",
        "→h_j has read x_1 … x_j and ←h_j has read x_S … x_j, so h_j summarises the whole "
        "sentence with a focus around x_j; the decoder state is the query",
        ["j", "token", *[f"→h_j[{k}]" for k in range(half)],
         *[f"←h_j[{k}]" for k in range(half)]],  # fmt: skip
        [[str(j), tok[j], *_vec(st.encoder[j])] for j in range(len(tok))]
        + [["t", query, *_vec(st.decoder_state)]],
    )


def _decoder_table(st: ExplainSteps) -> StepTable:
    """Step (5): Luong's attentional state, or Bahdanau's next RNN state."""
    d = st.encoder.shape[1]
    if st.decoder_kind == "bahdanau":
        assert st.prev_output is not None
        return StepTable(
            "(5) fed to the decoder's recurrence",
            st.attentional_formula,
            "the query was s_{t-1}; c_t enters the next state with the previous output y_{t-1} "
            "(f is a tanh RNN cell with seeded weights here, a GRU in the paper); "
            "p(y_t) = g(y_{t-1}, s_t, c_t)",
            ["", *_dims(d, "·")],
            [["y_{t-1}", *_vec(st.prev_output)], ["s_t", *_vec(st.attentional)]],
        )
    return StepTable(
        "(5) fed to the decoder",
        st.attentional_formula,
        "W_c is a seeded random (D, 2D) matrix here; Bahdanau 2015 instead feeds c_t into "
        "the next RNN state: s_t = f(s_{t-1}, y_{t-1}, c_t) (--decoder bahdanau)",
        ["", *_dims(d, "h̃_t")],
        [["h̃_t", *_vec(st.attentional)]],
    )


def step_tables(st: ExplainSteps) -> list[StepTable]:
    """The six steps of the example as tables of formatted numbers."""
    d = st.encoder.shape[1]
    tok = st.src_tokens
    idx = range(len(tok))
    window = ""
    if st.position is not None:
        window = f"the alignment centres a window on p_t = {st.position:.4f}; "
    if not bool(st.allowed.all()):
        window += "keys outside it get no weight"
    has_prior = st.prior is not None
    weight_cols = ["e_j", st.normaliser + "(e)_j"]
    weight_cols += ["prior_j", "a_j = prior·norm"] if has_prior else []
    weight_rows = []
    for j in idx:
        row = [str(j), tok[j], _num(float(st.scores[j])), _num(float(st.normalised[j]))]
        if st.prior is not None:
            row += [_num(float(st.prior[j])), _num(float(st.weights[j]))]
        weight_rows.append(row)
    sum_row = ["", "Σ", "", _num(float(st.normalised.sum()))]
    sum_row += ["", _num(float(st.weights.sum()))] if has_prior else []
    return [
        _encoder_table(st),
        StepTable(
            "(1) a score for every encoder state",
            f"e_j = {st.score_formula}",
            window or "every source position is considered (global attention)",
            ["j", "token", "e_j", "allowed"],
            [
                [str(j), tok[j], _num(float(st.scores[j])), "yes" if st.allowed[j] else "no"]
                for j in idx
            ],
        ),
        StepTable(
            f"(2) {st.normaliser}: scores become weights",
            f"a = {st.normaliser_formula}" + ("  × exp(-(j - p_t)² / 2σ²)" if has_prior else ""),
            "weights over the allowed keys; the local-p prior makes them sum to less than one"
            if has_prior
            else "the weights are non-negative and sum to one over the allowed keys",
            ["j", "token", *weight_cols],
            [*weight_rows, sum_row],
        ),
        StepTable(
            "(3) each state multiplied by its weight",
            "a_j · h_j",
            "states with more weight contribute more",
            ["j", "token", "a_j", *_dims(d, "a_j·h_j")],
            [[str(j), tok[j], _num(float(st.weights[j])), *_vec(st.weighted[j])] for j in idx],
        ),
        StepTable(
            "(4) the sum: the context vector",
            "c_t = Σ_j a_j h_j",
            "a summary of the source, weighted by relevance to h_t",
            ["", *_dims(d, "c_t")],
            [["c_t = Σ a_j h_j", *_vec(st.context)]],
        ),
        _decoder_table(st),
    ]


def render_terminal(st: ExplainSteps, console: object | None = None) -> None:
    """Print the steps as rich tables (to ``console``, a rich Console, or stdout)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    con = console if isinstance(console, Console) else Console()
    con.rule("[bold]attention, step by step")
    for line in header(st):
        con.print(line, markup=False, highlight=False)
    for step in step_tables(st):
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for k, col in enumerate(step.columns):
            table.add_column(col, justify="left" if k < 2 else "right")
        for row in step.rows:
            table.add_row(*row)
        con.print()
        con.print(f"[bold]{step.title}[/bold]", highlight=False)
        con.print("  " + step.formula, markup=False, highlight=False, soft_wrap=True)
        con.print(table)
        con.print("  " + step.note, markup=False, highlight=False, style="dim", soft_wrap=True)


_STEPPER_CSS = """
body { margin: 1.2em; }
h1 { font-size: 1.2em; } .hidden { display: none; }
pre#header { background: #f6f6f6; padding: .6em; font-size: .85em; }
.formula { font-family: "DejaVu Sans Mono", monospace; background: #eef3ff; padding: .3em .5em; }
.note { color: #555; font-size: .9em; }
table { border-collapse: collapse; margin: .6em 0; }
td, th { border: 1px solid #ddd; padding: .2em .6em; text-align: right; white-space: pre; }
th { background: #f3f3f3; }
nav { margin: .8em 0; display: flex; gap: 1em; align-items: center; }
"""

_STEPPER_JS = """
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("steps-data").textContent);
  function el(tag, text) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  document.getElementById("header").textContent = data.header.join("\\n");
  const host = document.getElementById("steps");
  const sections = data.steps.map(function (s, k) {
    const sec = el("section");
    sec.className = "step hidden";
    sec.dataset.step = String(k);
    sec.appendChild(el("h2", s.title));
    const f = el("div", s.formula); f.className = "formula"; sec.appendChild(f);
    const n = el("p", s.note); n.className = "note"; sec.appendChild(n);
    const table = el("table"), tr = el("tr");
    s.columns.forEach(function (c) { tr.appendChild(el("th", c)); });
    table.appendChild(tr);
    s.rows.forEach(function (r) {
      const row = el("tr");
      r.forEach(function (c) { row.appendChild(el("td", c)); });
      table.appendChild(row);
    });
    sec.appendChild(table);
    host.appendChild(sec);
    return sec;
  });
  let current = 0;
  function go(k) {
    current = Math.max(0, Math.min(sections.length - 1, k));
    sections.forEach(function (s, i) { s.classList.toggle("hidden", i !== current); });
    document.getElementById("where").textContent =
      "step " + current + " of " + (sections.length - 1);
  }
  document.getElementById("prev").addEventListener("click", function () { go(current - 1); });
  document.getElementById("next").addEventListener("click", function () { go(current + 1); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowRight") go(current + 1);
    if (e.key === "ArrowLeft") go(current - 1);
  });
  go(0);
  document.body.dataset.ready = "1";
})();
"""


def stepper_html(st: ExplainSteps) -> str:
    """A self-contained HTML stepper of the six steps (no network; tables built with
    textContent from embedded JSON)."""
    data = {"header": header(st), "steps": [asdict(t) for t in step_tables(st)]}
    payload = embed_json(data)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        "<title>attention, step by step</title>\n"
        f"<style>{page_font_css([payload])}{_STEPPER_CSS}</style>\n</head>\n<body>\n"
        '<h1>attention, step by step</h1>\n<pre id="header"></pre>\n'
        '<nav><button id="prev">← prev</button><span id="where"></span>'
        '<button id="next">next →</button></nav>\n<div id="steps"></div>\n'
        f'<script type="application/json" id="steps-data">{payload}</script>\n'
        f"<script>{_STEPPER_JS}</script>\n</body>\n</html>\n"
    )


def write_stepper(path: str | Path, st: ExplainSteps) -> Path:
    return write_html(path, stepper_html(st))


__all__ = ["StepTable", "header", "render_terminal", "step_tables", "stepper_html", "write_stepper"]
