"""``attnkit info``: the family of attention mechanisms as the notes draw it (each branch with
where it is in attnkit), then the registered variants with their papers and formulas."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

KWARG = {"score": "score", "alignment": "align", "normaliser": "normaliser",
         "reduction": "reduce", "position": "position", "output": "output"}  # fmt: skip
"""A registry stage -> the keyword of ``attnkit.build`` that takes its names."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("info", help="the family of attention mechanisms and where each is",
                       description="Prints the taxonomy (score, alignment, sparsity, cost, "
                       "position, softness, input, output, models) with where each branch is in "
                       "attnkit, then every registered variant with its paper and "
                       "formula.")  # fmt: skip
    p.set_defaults(run=run)


def where_text(place: str) -> str:
    """A place of ``taxonomy.Branch.where`` as a user types it."""
    kind, _, rest = place.partition(":")
    if kind == "registry":
        stage, name = rest.split("/")
        return f'{KWARG[stage]}="{name}"'
    if kind == "module":
        return rest.replace(":", ".")
    if kind == "model":
        return f"--model {rest}"
    return rest  # a flag, as typed


def run(args: argparse.Namespace) -> int:
    from ..registry import VARIANTS
    from ..taxonomy import FAMILY

    print("the family (attnkit.taxonomy): axis, variant, paper, where it is in attnkit")
    for b in headed(FAMILY, lambda b: f"{b.axis}:"):
        print(f"  {b.name}  ({b.paper})")
        print(f"      {', '.join(where_text(w) for w in b.where)}")
    print("\nthe registered variants (attnkit.build(score=..., align=..., ...)):")
    width = max(len(v.name) for v in VARIANTS)
    for v in headed(VARIANTS, lambda v: f"{v.stage}s:"):
        print(f"  {v.name:<{width}}  {v.paper:<34} {v.formula}")
    return 0


def headed(items: Iterable[T], heading: Callable[[T], str]) -> Iterator[T]:
    """``items`` in order, printing an item's ``heading`` (after a blank line) before the
    first item of each run of items with the same heading."""
    last = None
    for item in items:
        if heading(item) != last:
            last = heading(item)
            print(f"\n{last}")
        yield item
