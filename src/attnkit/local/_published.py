"""A build published in the cache is loaded only when it is whole: the check behind
``_build.load_or_build``.

Loading a shared library maps it into memory; a file shorter than its headers say (an
interrupted copy of the cache, a disk that filled up, ``truncate -s 100000``) loads without an
error and then kills the process with SIGBUS when a missing page is touched: no message, no
traceback, and every later process dies the same way. So each published ``NAME.so`` has a
record beside it, ``NAME.so.json``, holding its size in bytes and its SHA-256, written
atomically (a temporary file renamed) before the ``.so`` itself is published. Before a load:

- a file whose size or SHA-256 differs from its record is damaged;
- a file without a record (built by an attnkit before records, or its record lost) is checked
  against its own ELF headers: every segment the loader maps, and the section table, must lie
  inside the file (a truncated file fails this; the check reads a few kilobytes and loads
  nothing). A whole one is loaded and its record written beside it (a read-only cache cannot
  take it: there the header check runs in every process). A file that is not ELF (empty,
  foreign, a non-Linux build) is left to the loader, which refuses it with an ImportError
  rather than mapping it; it is then moved aside silently, as before records;
- a damaged file is moved aside (``.NAME.so.broken-PID``) with one warning, and the caller
  builds it again; one that cannot be moved (a read-only cache) is not loaded.

Two builders publishing at once (possible only after a holder stopped refreshing its lock for
a whole lease, e.g. a suspended process) can leave one's record beside the other's file: the
next load then finds a mismatch, warns once and rebuilds; nothing is loaded unchecked.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import struct
import tempfile
import warnings
from pathlib import Path
from types import ModuleType

_ELF = b"\x7fELF"


def record_path(so: Path) -> Path:
    """Where the record of ``so`` lives: ``NAME.so.json`` beside it."""
    return so.with_name(so.name + ".json")


def record(so: Path, final: Path) -> None:
    """Write the record of the built file ``so`` (size, SHA-256) as the record of ``final``,
    atomically. Raises OSError when the cache cannot take it."""
    _write_record(record_path(final), _fingerprint(so))


def load(name: str, path: Path) -> ModuleType | None:
    """The published extension at ``path`` when it is whole, or None: no file there, or a
    damaged one (moved aside with a warning so that it is built again). A whole file that still
    cannot be imported (a build for another torch) is moved aside silently, as before records."""
    if not path.is_file():
        return None
    damage = _damage(path)
    if damage is not None:
        _move_aside(path, damage)
        return None
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"no loader for {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    except ImportError:
        with contextlib.suppress(OSError):
            path.replace(_aside(path))
        return None


def _damage(path: Path) -> str | None:
    """Why ``path`` must not be loaded, or None when it is whole."""
    try:
        have = _fingerprint(path)
    except OSError as err:
        return f"it cannot be read ({err.strerror or err})"
    want = _read_record(record_path(path))
    if want is None:  # no record: an older attnkit's build, checked against its ELF headers
        damage = _truncated(path, int(have["size"]))
        if damage is None:
            with contextlib.suppress(OSError):  # a read-only cache: checked again next time
                _write_record(record_path(path), have)
        return damage
    if have["size"] != want["size"]:
        return f"it has {have['size']} bytes where its build wrote {want['size']}"
    if have["sha256"] != want["sha256"]:
        return "its SHA-256 differs from its build's"
    return None


def _truncated(path: Path, size: int) -> str | None:
    """Why the ELF file ``path`` (``size`` bytes) is cut short, or None when every part its
    headers place in the file is there (or it is not ELF: the loader judges that). The end of
    the file needed is the largest of: the program header table's end, each segment's
    ``p_offset + p_filesz`` (what the loader maps), the section header table's end (the
    ELF specification, System V ABI, ch. 4 and 5)."""
    try:
        with path.open("rb") as f:
            head = f.read(64)
            if head[:4] != _ELF:
                return None
            wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            # (e_phoff, e_shoff) and (e_phentsize, e_phnum, e_shentsize, e_shnum)
            offsets = struct.unpack_from(order + ("QQ" if wide else "II"), head, 32 if wide else 28)
            counts = struct.unpack_from(order + "HHHH", head, 54 if wide else 42)
            phoff, shoff = offsets
            phentsize, phnum, shentsize, shnum = counts
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except (OSError, struct.error):
        return f"its ELF header is cut short ({size} bytes)"
    need = max(phoff + phentsize * phnum, shoff + shentsize * shnum if shnum else 0)
    if len(table) == phentsize * phnum:
        at, field = (8, "QxxxxxxxxxxxxxxxxQ") if wide else (4, "IxxxxxxxxI")
        for i in range(phnum):
            offset, filesz = struct.unpack_from(order + field, table, i * phentsize + at)
            need = max(need, offset + filesz)
    if size < need:
        return f"it has {size} bytes where its ELF headers need {need}"
    return None


def _fingerprint(path: Path) -> dict[str, int | str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


def _read_record(path: Path) -> dict[str, int | str] | None:
    """The record, or None when there is none or it cannot be read (then it is as if none)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    size, sha = data.get("size"), data.get("sha256")
    if type(size) is not int or not isinstance(sha, str):
        return None
    return {"size": size, "sha256": sha}


def _write_record(path: Path, fingerprint: dict[str, int | str]) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o644)  # readable by everyone who shares the cache, as the .so is
        with os.fdopen(fd, "w") as f:
            json.dump(fingerprint, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _aside(path: Path) -> Path:
    return path.with_name(f".{path.name}.broken-{os.getpid()}")


def _move_aside(path: Path, damage: str) -> None:
    try:
        path.replace(_aside(path))
        done = "moved it aside; it is built again"
    except OSError as err:
        done = (f"it cannot be moved aside ({err.strerror or err}); delete it, or set "
                "TORCH_EXTENSIONS_DIR to a writable folder")  # fmt: skip
    warnings.warn(f"attnkit: the cached build {path} is damaged: {damage}; {done}",
                  RuntimeWarning, stacklevel=4)  # fmt: skip


__all__ = ["load", "record", "record_path"]
