"""The MkDocs hooks of mkdocs.yml: scripts/docs_links.py resolves links from docs/ to files
outside it and reports the broken ones (on a small tree made here; and finds no broken one in
the real docs); scripts/docs_titles.py titles a page by its first heading."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location("docs_links", ROOT / "scripts" / "docs_links.py")
assert _spec is not None and _spec.loader is not None
docs_links = importlib.util.module_from_spec(_spec)
sys.modules["docs_links"] = docs_links  # dataclasses look their module up there
_spec.loader.exec_module(docs_links)
resolve_links = docs_links.resolve_links


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "repo"
    (root / "docs" / "sub").mkdir(parents=True)
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "core.py").write_text("x = 1\n")
    (root / "README.md").write_text("# readme\n")
    (root / "docs" / "guide.md").write_text("# guide\n")
    return root, root / "docs"


def test_links_out_of_docs_are_copied_or_sent_to_the_repository(tmp_path: Path) -> None:
    root, docs = _tree(tmp_path)
    page = (
        "See [the core](../src/pkg/core.py#L1), [the README](../README.md 'title'),\n"
        "[a guide](guide.md), [the web](https://example.org/x.md) and [top](#top).\n"
    )
    r = resolve_links(page, "index.md", docs, root)
    assert r.problems == []
    assert r.copies == {"src/pkg/core.py", "README.md"}
    assert "[the core](_repo/src/pkg/core.py#L1)" in r.markdown
    assert "[the README](_repo/README.md 'title')" in r.markdown
    assert "[a guide](guide.md)" in r.markdown
    assert "(https://example.org/x.md)" in r.markdown and "[top](#top)" in r.markdown

    nested = resolve_links("![img](../../src/pkg/core.py)", "sub/page.md", docs, root)
    assert nested.markdown == "![img](../_repo/src/pkg/core.py)"  # relative to sub/

    hosted = resolve_links(
        '[c](../src/pkg/core.py "t") [d](../src)', "index.md", docs, root, "https://h/o/r/"
    )
    assert hosted.markdown == '[c](https://h/o/r/blob/main/src/pkg/core.py "t") ' + (
        "[d](https://h/o/r/tree/main/src)"
    )
    assert hosted.copies == set()


def test_broken_links_out_of_docs_are_reported(tmp_path: Path) -> None:
    root, docs = _tree(tmp_path)
    page = "[gone](../src/pkg/gone.py) [out](../../elsewhere.md) [dir](../src)"
    r = resolve_links(page, "index.md", docs, root)
    assert r.markdown == page
    assert len(r.problems) == 3
    assert "src/pkg/gone.py, which does not exist" in r.problems[0]
    assert "leaves the repository" in r.problems[1]
    assert "is a folder" in r.problems[2]


def test_code_is_not_read(tmp_path: Path) -> None:
    root, docs = _tree(tmp_path)
    page = "```python\nx = a[0](../gone.py)\n```\nand `[y](../gone.py)` inline"
    r = resolve_links(page, "index.md", docs, root)
    assert r.problems == [] and r.markdown == page


def test_the_real_docs_have_no_broken_link_out_of_docs() -> None:
    docs = ROOT / "docs"
    problems = [
        p
        for md in sorted(docs.rglob("*.md"))
        for p in resolve_links(
            md.read_text(encoding="utf-8"), md.relative_to(docs).as_posix(), docs, ROOT
        ).problems
    ]
    assert not problems, problems


def test_a_page_is_titled_by_its_first_heading() -> None:
    spec = importlib.util.spec_from_file_location("docs_titles", ROOT / "scripts/docs_titles.py")
    assert spec is not None and spec.loader is not None
    titles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(titles)
    page = "intro\n```bash\n# not a heading\n```\n## `heads`: [Vaswani](x.md) 2017 ##\n# later\n"
    assert titles.first_heading(page) == (2, "heads: Vaswani 2017")
    assert titles.first_heading("# Top\n## sub\n") == (1, "Top")
    assert titles.first_heading("no heading\n") is None


def test_indented_blocks_of_docstrings_stay_blocks() -> None:
    spec = importlib.util.spec_from_file_location("docs_docs", ROOT / "scripts/docs_docstrings.py")
    assert spec is not None and spec.loader is not None
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    formula = "One signature:\n    q (..., D) -> (..., T)\nAfter."
    assert ext.separate_blocks(formula) == "One signature:\n\n    q (..., D) -> (..., T)\nAfter."
    table = "Names:\n\n  ``a``   first\n          more\n\nEnd."
    assert ext.separate_blocks(table) == "Names:\n\n    ``a``   first\n            more\n\nEnd."
    items = "Checks:\n  * one\n  * two"
    assert ext.separate_blocks(items) == "Checks:\n\n  * one\n  * two"
    hanging = "tokens(e) -> (src, tgt): what the\n    family reads as tokens."
    assert ext.separate_blocks(hanging) == hanging  # a paragraph's continuation: unchanged
