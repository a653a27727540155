"""The README stays a page a newcomer reads in ten minutes: at most 15 kB (15,360 bytes), with a
table of contents near the top that lists every section and whose links land on headings
(GitHub's anchors). What does not fit goes to docs/."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "README.md"
LIMIT = 15 * 1024  # bytes
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
ANCHOR_LINK = re.compile(r"\]\(#([^)\s]+)\)")


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, text) of each ATX heading outside fenced code, in order."""
    out, in_fence = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := HEADING.match(line)):
            out.append((len(m.group(1)), m.group(2)))
    return out


def github_slug(text: str) -> str:
    """GitHub's anchor for a heading: the rendered text lower-cased, every character but
    letters, digits, spaces, hyphens and underscores dropped, spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link reads as its text
    text = text.replace("`", "").replace("*", "").lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor, with GitHub's -1, -2 … suffixes for repeated ones."""
    seen: dict[str, int] = {}
    out = set()
    for _, text in headings(markdown):
        slug = github_slug(text)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def table_of_contents(markdown: str) -> list[str]:
    """The anchors linked from the "## Contents" section (empty when there is none)."""
    m = re.search(r"(?ms)^## Contents\s*$(.*?)^## ", markdown)
    return ANCHOR_LINK.findall(m.group(1)) if m else []


def test_the_slug_is_githubs() -> None:
    assert github_slug("Looking inside attention") == "looking-inside-attention"
    assert github_slug("Dependencies and why") == "dependencies-and-why"
    assert github_slug("Speed: `attnkit bench`, measured") == "speed-attnkit-bench-measured"
    assert github_slug("Ten lines (O(n·w))") == "ten-lines-onw"
    md = "# a\n## Same\n```\n## not a heading\n```\n## Same\n"
    assert anchors(md) == {"a", "same", "same-1"}


def test_the_readme_is_at_most_15_kb() -> None:
    size = len(README.read_bytes())
    assert size <= LIMIT, (
        f"README.md is {size:,} bytes, over {LIMIT:,}: move detail (tables, measured figures, "
        "the tree) to a page under docs/ and link it"
    )


def test_the_readme_has_a_table_of_contents_near_the_top() -> None:
    text = README.read_text(encoding="utf-8")
    toc = table_of_contents(text)
    assert toc, "README.md needs a '## Contents' section of [section](#anchor) links"
    sections = [h for level, h in headings(text) if level == 2 and h != "Contents"]
    assert text.index("## Contents") < text.index(f"## {sections[0]}"), (
        "put the table of contents before the first section"
    )
    assert toc == [github_slug(h) for h in sections], (
        "the table of contents lists every ## section of README.md, in order"
    )


@pytest.mark.parametrize("anchor", ANCHOR_LINK.findall(README.read_text(encoding="utf-8")))
def test_every_anchor_link_of_the_readme_lands_on_a_heading(anchor: str) -> None:
    found = anchors(README.read_text(encoding="utf-8"))
    assert anchor in found, f"#{anchor} is no heading of README.md; headings: {sorted(found)}"


EXPERIMENT_ROW = re.compile(
    r"^\| \[([\w-]+)\]\(docs/experiments/\1\.md\) \| [^|]+ \| ([^|]+) \|$", re.M
)
OUTCOMES = ("NOT REPRODUCED", "REPRODUCED", "INCONCLUSIVE")  # the longest prefix first


def outcome(text: str) -> str | None:
    return next((o for o in OUTCOMES if text.strip().startswith(o)), None)


def test_the_readmes_verdicts_are_the_committed_runs() -> None:
    """Each experiment's row states the verdict of its committed default run
    (docs/experiments/NAME.json, or NAME-default.json where the page keeps several runs), so
    a re-run that changes a verdict cannot leave the README saying the old one."""
    import json

    rows = EXPERIMENT_ROW.findall(README.read_text(encoding="utf-8"))
    assert len(rows) >= 10, "the README's experiments table: | [name](docs/experiments/name.md) |"
    folder = README.parent / "docs" / "experiments"
    for name, said in rows:
        path = next(p for p in (folder / f"{name}.json", folder / f"{name}-default.json")
                    if p.exists())  # fmt: skip
        committed = json.loads(path.read_text(encoding="utf-8"))["verdict"]
        assert outcome(said) == outcome(committed), (
            f"README says {name}: {said.strip()!r}; {path.name} says {committed[:80]!r}"
        )
