"""``attnkit explain``: one attention computation, step by step, with its numbers.

attnkit explain --score additive --align local-p --window 2 --html steps.html --gif steps.gif
"""

from __future__ import annotations

import argparse
from typing import Any

from ..registry import ALIGNMENTS, NORMALISERS, SCORES


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="walk through one attention computation step by step, with numbers",
        description=(
            "Prints, for a small seeded example: (0) encoder states, (1) a score for each, "
            "(2) the normalised weights, (3) each state times its weight, (4) their sum, the "
            "context vector, (5) the decoder's attentional state. Numbers are computed by "
            "attnkit itself (registry + attend)."
        ),
    )
    p.add_argument("--score", default="dot", help=f"one of {sorted(SCORES)}")
    p.add_argument("--align", default="global", help=f"one of {sorted(ALIGNMENTS)}")
    p.add_argument("--normaliser", default="softmax", help=f"one of {sorted(NORMALISERS)}")
    p.add_argument("--window", type=int, default=None, help="window D for local/sliding")
    p.add_argument(
        "--stride", type=int, default=None, help="stride l for the strided / fixed patterns"
    )
    p.add_argument("--temperature", type=float, default=1.0, help="softmax temperature T")
    p.add_argument(
        "--src", default="the cat sat on the mat", help="source tokens, separated by spaces"
    )
    p.add_argument("--dim", type=int, default=4, help="width of the states")
    p.add_argument("--step", type=int, default=2, help="decoder step t")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--encoder", choices=("random", "birnn"), default="random",
                   help="step 0's states: seeded numbers, or a bidirectional RNN's forward and "
                   "backward halves (Bahdanau 2015, §3.2)")  # fmt: skip
    p.add_argument("--decoder", choices=("luong", "bahdanau"), default="luong",
                   help="step 5: Luong's attentional state tanh(W_c [c_t; h_t]), or Bahdanau's "
                   "next state s_t = f(s_{t-1}, y_{t-1}, c_t)")  # fmt: skip
    p.add_argument("--html", help="also write the steps as an HTML stepper here")
    p.add_argument("--gif", help="also write the steps as an animated GIF here")
    p.add_argument(
        "--neuron",
        metavar="FILE.html",
        help="also write the neuron view here: the query's side, each key's side, their "
        "elementwise product and its sum (the score), then the weights",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..viz.explain import explain_steps
    from ..viz.explain_render import render_terminal, write_stepper

    if args.window is None and args.align in ("local-m", "local-p", "sliding", "sliding-causal"):
        raise ValueError(f"--align {args.align} needs a window: add --window D (e.g. --window 2)")
    if args.dim > 64 or len(args.src.split()) > 40:
        raise ValueError("the explainer is for small examples: --dim <= 64 and <= 40 tokens")
    steps = explain_steps(
        args.score,
        args.align,
        args.normaliser,
        src_tokens=args.src.split(),
        dim=args.dim,
        window=args.window,
        stride=args.stride,
        temperature=args.temperature,
        target_step=args.step,
        seed=args.seed,
        encoder=args.encoder,
        decoder=args.decoder,
    )
    render_terminal(steps)
    if args.html:
        print(f"wrote {write_stepper(args.html, steps)}: open it and press → to step")
    if args.neuron:
        print(f"wrote {_neuron(args, steps)}")
    if args.gif:
        from ..viz.explain_gif import write_gif

        print(f"wrote {write_gif(args.gif, steps)}")
    return 0


def _neuron(args: argparse.Namespace, steps: Any) -> Any:
    """The neuron view of the example's query: the score is rebuilt exactly as
    ``explain_steps`` builds it (the same seed before the same call)."""
    import torch

    from ..registry import build_score
    from ..viz.neuron import neuron_view, write_neuron_page

    torch.manual_seed(args.seed)
    score = build_score(args.score, args.dim, hidden=args.dim, max_keys=len(steps.src_tokens))
    view = neuron_view(score.double(), steps.decoder_state, steps.encoder, steps.src_tokens,
                       query_token=f"h_{steps.target_step}")  # fmt: skip
    return write_neuron_page(args.neuron, view)
