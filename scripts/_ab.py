"""What the A/B scripts share: another checkout's attnkit imported beside this one."""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType


def import_before(src: str, module: str) -> ModuleType:
    """``attnkit.<module>`` of the checkout whose src folder is ``src``, copied to a temporary
    folder as the package ``attnkit_before`` (its imports are package-relative), so both
    builds run in one process."""
    if not (Path(src) / "attnkit").is_dir():
        raise SystemExit(f"--before {src}: no attnkit package there (give a checkout's src)")
    tmp = Path(tempfile.mkdtemp())
    shutil.copytree(Path(src) / "attnkit", tmp / "attnkit_before")
    sys.path.insert(0, str(tmp))
    return importlib.import_module(f"attnkit_before.{module}")
