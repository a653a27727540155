"""Every code block of README.md and docs/ runs as written, so the examples cannot drift.

A fenced block tagged ``python`` or ``bash`` is executed in a fresh temporary folder (python
in a subprocess; bash line by line with ``set -e``, the checkout's ``attnkit`` first on PATH).
A block that cannot run here (it installs, trains for minutes, or reads a run made by an
earlier command) carries its reason on the line just before the fence:

    <!-- not run: trains for minutes; tests/cli/test_train_out.py runs it small -->

A python block marked ``<!-- continues -->`` runs after the file's previous python block (and
whatever that one continued), in the same process and folder, as a reader runs them in turn.

An untagged fence is output (what a command prints, a ``$ command`` transcript), not code; an
untagged fence that starts like code (``attnkit ...``, ``python ...``, ``import ...``) fails,
as does a marker without a reason: a new example cannot slip in unchecked.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARK = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->")
CONTINUES = re.compile(r"<!--\s*continues\s*-->")
RUNNABLE = {"python", "bash"}
OUTPUT = {"", "text", "console-output", "json", "csv", "html"}
LOOKS_LIKE_CODE = re.compile(r"^(attnkit |python|import |from \S+ import|pip |bash |torchrun )")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None  # the reason, when marked "not run"

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i, chain = [], 0, ""
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        code = "\n".join(line.removeprefix(indent) for line in lines[i + 1 : j])
        before = lines[i - 1] if i > 0 else ""
        mark = MARK.search(before)
        if lang == "python":
            chain = f"{chain}\n{code}" if CONTINUES.search(before) else code
            code = chain
        out.append(Block(path, i + 1, lang, code, mark.group(1) if mark else None))
        i = j + 1
    return out


BLOCKS = [b for f in FILES for b in blocks_of(f)]


def test_every_block_is_runnable_output_or_says_why_not():
    unknown = [b.id for b in BLOCKS if b.lang not in RUNNABLE | OUTPUT and b.skip is None]
    assert not unknown, f"tag them python/bash, or mark them <!-- not run: why -->: {unknown}"
    hidden = [
        b.id
        for b in BLOCKS
        if b.lang == "" and b.skip is None and LOOKS_LIKE_CODE.match(b.code.lstrip())
    ]
    assert not hidden, f"these untagged blocks are code: tag them python/bash: {hidden}"
    empty = [b.id for b in BLOCKS if b.skip is not None and len(b.skip) < 10]
    assert not empty, f"say why these blocks are not run: {empty}"


def test_the_readme_and_docs_examples_are_actually_run():
    """A marker cannot quietly switch the check off: README's Python examples (the core, hard
    attention, the drop-in module) and at least ten blocks in all stay runnable."""
    runnable = [b for b in BLOCKS if b.lang in RUNNABLE and b.skip is None]
    readme = [b for b in runnable if b.path.name == "README.md" and b.lang == "python"]
    assert len(readme) >= 3 and len(runnable) >= 10, [b.id for b in runnable]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{ROOT / 'src'}{os.pathsep}{env.get('PYTHONPATH', '')}"
    env.setdefault("OMP_NUM_THREADS", "1")
    env["MPLBACKEND"] = "Agg"
    return env


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.lang in RUNNABLE and b.skip is None], ids=lambda b: b.id
)
def test_block_runs(block: Block, tmp_path: Path) -> None:
    if block.lang == "python":
        cmd = [sys.executable, "-c", block.code]
    else:
        cmd = ["bash", "-euo", "pipefail", "-c", block.code]
    run = subprocess.run(
        cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240
    )
    assert run.returncode == 0, f"{block.id} failed:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
