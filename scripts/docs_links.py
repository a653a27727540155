"""MkDocs hook: links from docs/ to files outside it (``../src/attnkit/core.py``, ``../README.md``).

MkDocs validates links between documentation files and, in strict mode, fails on one it
cannot find; a link that leaves docs/ is always one it cannot find. This hook resolves those
links before MkDocs validates, and reports the broken ones itself, as warnings (so
``mkdocs build --strict`` still fails on them):

- a link whose target exists in the repository is rewritten: to ``{repo_url}/blob/main/PATH``
  (``tree`` for a folder) when mkdocs.yml sets ``repo_url``; otherwise the file is copied
  into the site as ``_repo/PATH`` and the link points there (a folder then cannot be linked);
- a link whose target does not exist, or lies outside the repository, is a warning naming
  the page, the link and the missing path.

Links inside docs/, and links with a scheme (``https:``), are left to MkDocs' own checks.
Code (fenced blocks and inline code spans) is not read.
"""

from __future__ import annotations

import logging
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.docs_links")

PREFIX = "_repo"  # where copied files go in the site
# [text](target) or ![alt](target "title"); the target is group 2
LINK = re.compile(r"(\]\()\s*<?([^)\s>]+)>?((?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\))")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


@dataclass
class Resolved:
    """What one page's outside links became: the new Markdown, the repository files to copy
    into the site (paths relative to the root), and the broken links."""

    markdown: str
    copies: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def _outside_target(target: str, page: str, docs: Path, root: Path) -> tuple[str, str] | None:
    """(path relative to the root, anchor) of a relative link that leaves docs/, else None."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return None
    path, _, anchor = target.partition("#")
    where = (docs / posixpath.dirname(page) / path).resolve()
    if where == docs or docs in where.parents:
        return None
    return posixpath.normpath(Path(posixpath.relpath(where, root)).as_posix()), anchor


def resolve_links(
    markdown: str, page: str, docs: Path, root: Path, repo_url: str | None = None
) -> Resolved:
    """Rewrite the links of ``markdown`` (the page at ``page``, relative to ``docs``) that
    leave ``docs``; see the module docstring for what each becomes."""
    docs, root = docs.resolve(), root.resolve()
    out = Resolved(markdown="")
    depth = page.count("/")

    def rewrite(m: re.Match[str]) -> str:
        found = _outside_target(m.group(2), page, docs, root)
        if found is None:
            return m.group(0)
        rel, anchor = found
        target = root / rel
        if rel.startswith("../") or rel == "..":
            out.problems.append(f"{page}: link {m.group(2)!r} leaves the repository")
            return m.group(0)
        if not target.exists():
            out.problems.append(
                f"{page}: link {m.group(2)!r} points to {rel}, which does not exist"
            )
            return m.group(0)
        if repo_url:
            kind = "tree" if target.is_dir() else "blob"
            new = f"{repo_url.rstrip('/')}/{kind}/main/{rel}"
        elif target.is_dir():
            out.problems.append(
                f"{page}: link {m.group(2)!r} is a folder; set repo_url in mkdocs.yml to link it"
            )
            return m.group(0)
        else:
            out.copies.add(rel)
            new = "../" * depth + f"{PREFIX}/{rel}"
        return f"{m.group(1)}{new}{'#' + anchor if anchor else ''}{m.group(3)}"

    lines, in_fence = [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            spans = [s.span() for s in CODE_SPAN.finditer(line)]

            def outside_code(m: re.Match[str], spans: list[tuple[int, int]] = spans) -> str:
                if any(a <= m.start() < b for a, b in spans):
                    return m.group(0)
                return rewrite(m)

            line = LINK.sub(outside_code, line)
        lines.append(line)
    out.markdown = "\n".join(lines)
    return out


# ------------------------------------------------------------------------------------------
# MkDocs events
# ------------------------------------------------------------------------------------------


def _paths(config: Any) -> tuple[Path, Path]:
    docs = Path(config["docs_dir"]).resolve()
    return docs, Path(config["config_file_path"]).resolve().parent


def on_files(files: Any, config: Any) -> Any:
    """Resolve every page's outside links; add the repository files they need to the site."""
    from mkdocs.structure.files import File

    class RawFile(File):
        """A repository file served as it is (a .md one too, not rendered as a page)."""

        def is_documentation_page(self) -> bool:
            return False

    docs, root = _paths(config)
    copies: set[str] = set()
    for f in files.documentation_pages():
        resolved = resolve_links(f.content_string, f.src_uri, docs, root, config.get("repo_url"))
        copies |= resolved.copies
        for problem in resolved.problems:
            log.warning(problem)
    for rel in sorted(copies):
        raw = RawFile.generated(config, f"{PREFIX}/{rel}", abs_src_path=str(root / rel))
        raw.dest_uri = raw.src_uri
        files.append(raw)
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The page's Markdown with its outside links rewritten (MkDocs then validates them; the
    broken ones were reported by ``on_files``)."""
    docs, root = _paths(config)
    return resolve_links(markdown, page.file.src_uri, docs, root, config.get("repo_url")).markdown
