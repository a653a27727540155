"""``attnkit info``: the registered variants, with their papers and formulas."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("info", help="list the registered attention variants")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..registry import VARIANTS

    width = max(len(v.name) for v in VARIANTS)
    stage = ""
    for v in VARIANTS:
        if v.stage != stage:
            stage = v.stage
            print(f"\n{stage}s:")
        print(f"  {v.name:<{width}}  {v.paper:<34} {v.formula}")
    return 0
