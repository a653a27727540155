"""A baseline for ``attnkit bench --baseline FILE``, read and checked before anything runs.

The file says what to re-run, so it is input like a command line and is checked as one:
its size before it is read (``/dev/zero`` is not read into memory), then every setting's
type and range (a ``repeats`` of 10^9 or 2.5, ``backward: ["yes"]``, sizes of 0, a
``matmul_size`` of 10^6 are one line naming the key), and a kernel report without the
settings that decide the work (``config`` missing, a list, or only unknown keys) is refused
rather than re-run with the defaults, which would be the whole suite for hours.

    report = read_baseline(path)
    suite = kernel_settings(report, path)    # SuiteConfig's keyword arguments
    models = model_settings(report, path)    # versus_speed's keyword arguments
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

MAX_BYTES = 16 * 2**20
"""The largest baseline read: a full bench.json is tens of kB."""

BIG = 2**24  # sizes, radii and strides: beyond any sequence the bench can hold
KERNEL_INTS: dict[str, tuple[int, int]] = {
    "warmup": (0, 100), "repeats": (1, 100), "matmul_repeats": (1, 100),
    "matmul_size": (16, 16384), "heads": (1, 1024), "dim": (1, 4096),
    "local_radius": (1, BIG), "causal_radius": (1, BIG),
}  # fmt: skip
"""Integer settings of a kernel report's ``config`` and their inclusive ranges."""
KERNEL_SIZES = ("global_sizes", "local_sizes", "additive_sizes")
KERNEL_NUMBERS: dict[str, float] = {"time_limit_s": 86400.0, "memory_limit_gib": 4096.0}
"""Positive real settings and their largest values."""
KERNEL_NEEDED = ("scenarios", *KERNEL_SIZES, "backward", "warmup", "repeats")
"""The settings that decide how much work a re-run is: a config without one is refused."""
MODEL_INTS: dict[str, tuple[int, int]] = {
    "steps": (1, 1000), "warmup": (0, 100), "repeats": (1, 100), "batch_size": (1, 4096),
    "seed": (0, 2**32 - 1),
}  # fmt: skip
"""Integer settings of a whole-model report's ``models`` and their inclusive ranges."""


def read_baseline(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``: a ValueError (naming ``--baseline``) for a missing file,
    one that is not a regular file or is over ``MAX_BYTES``, or that is not a JSON object."""
    where = f"--baseline {path}"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file") from None
    except OSError as e:
        raise ValueError(f"{where}: cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{where}: not a regular file; give the bench.json that bench wrote")
    if st.st_size > MAX_BYTES:
        raise ValueError(
            f"{where}: {st.st_size:,} bytes, over the {MAX_BYTES // 2**20} MiB a bench "
            "report can be; give the bench.json or bench_models.json that bench wrote"
        )
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)  # a file that grew since stat is still bounded
        if len(data) > MAX_BYTES:
            raise ValueError(f"{where}: over {MAX_BYTES // 2**20} MiB")
        report = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{where}: not a JSON file attnkit bench wrote ({e})") from None
    if not isinstance(report, dict):
        raise ValueError(f"{where}: holds a JSON {type(report).__name__}, not a bench report")
    return report


def _int(where: str, key: str, value: Any, low: int, high: int) -> int:
    if type(value) is not int:
        raise ValueError(f"{where}: {key} is {value!r}; it must be an integer")
    if not low <= value <= high:
        raise ValueError(f"{where}: {key} is {value}; it must lie between {low} and {high}")
    return value


def _list(where: str, key: str, value: Any) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: {key} is {value!r}; it must be a non-empty list")
    return value


def kernel_settings(report: dict[str, Any], path: Path) -> dict[str, Any]:
    """``SuiteConfig``'s keyword arguments from a kernel report's ``config``, every value of
    the right type and in range; variants of scenarios the report did not run are dropped
    (a ``--quick`` run records its whole list), a name that is no variant is an error."""
    from .variants import VARIANTS

    where = f"--baseline {path}"
    config = report.get("config")
    if not isinstance(config, dict):
        found = "none" if config is None else f"a JSON {type(config).__name__}"
        raise ValueError(
            f"{where}: its config, which says what was run, is {found}; give the bench.json "
            "of a kernel run, or a bench_models.json, that attnkit bench wrote"
        )
    missing = [k for k in KERNEL_NEEDED if k not in config]
    if missing:
        raise ValueError(
            f"{where}: its config lacks {', '.join(missing)}, which decide how long a re-run "
            "takes; give a bench.json that attnkit bench wrote"
        )
    out: dict[str, Any] = {}
    for key, (low, high) in KERNEL_INTS.items():
        if key in config:
            out[key] = _int(where, key, config[key], low, high)
    for key in KERNEL_SIZES:
        out[key] = [_int(where, key, n, 1, BIG) for n in _list(where, key, config[key])]
    for key, top in KERNEL_NUMBERS.items():
        if key in config:
            value = config[key]
            if type(value) not in (int, float) or not (0 < value <= top and math.isfinite(value)):
                raise ValueError(f"{where}: {key} is {value!r}; give a number in (0, {top:g}]")
            out[key] = float(value)
    scenarios = _list(where, "scenarios", config["scenarios"])
    if not all(isinstance(s, str) and s in VARIANTS for s in scenarios):
        raise ValueError(f"{where}: scenarios {scenarios!r}; each is one of {sorted(VARIANTS)}")
    out["scenarios"] = scenarios
    backward = _list(where, "backward", config["backward"])
    if not all(type(b) is bool for b in backward):
        raise ValueError(f"{where}: backward is {backward!r}; it must be a list of true/false")
    out["backward"] = backward
    if config.get("sparse_stride") is not None:
        out["sparse_stride"] = _int(where, "sparse_stride", config["sparse_stride"], 1, BIG)
    for key in ("isolate",):
        if key in config:
            if type(config[key]) is not bool:
                raise ValueError(f"{where}: {key} is {config[key]!r}; it must be true or false")
            out[key] = config[key]
    if "device" in config:
        if config["device"] not in ("cpu", "cuda"):
            raise ValueError(f"{where}: device is {config['device']!r}; it is cpu or cuda")
        out["device"] = config["device"]
    out["variants"] = _variants(where, config.get("variants"), scenarios, VARIANTS)
    return out


def _variants(
    where: str, variants: Any, scenarios: list[str], table: dict[str, Any]
) -> list[str] | None:
    if variants is None:
        return None
    every = {v for names in table.values() for v in names}
    if not isinstance(variants, list) or not all(isinstance(v, str) for v in variants):
        raise ValueError(f"{where}: variants is {variants!r}; it must be a list of names")
    unknown = sorted(set(variants) - every)
    if unknown:
        raise ValueError(f"{where}: unknown variant(s) {unknown}; the bench has {sorted(every)}")
    ran = {v for s in scenarios for v in table[s]}
    kept = [v for v in variants if v in ran]
    if not kept:
        raise ValueError(
            f"{where}: none of its variants {variants} belongs to its scenarios {scenarios}"
        )
    return kept


def model_settings(report: dict[str, Any], path: Path) -> dict[str, Any]:
    """``versus_speed``'s keyword arguments from a whole-model report's ``models``, checked
    (names among the bench's models, integers in range)."""
    from .models import ROWS

    where = f"--baseline {path}"
    models = report.get("models")
    if not isinstance(models, dict):
        raise ValueError(f"{where}: models is {type(models).__name__}, not an object")
    out: dict[str, Any] = {}
    for key, (low, high) in MODEL_INTS.items():
        if key in models:
            out[key] = _int(where, f"models.{key}", models[key], low, high)
    if "preset" in models:
        if not isinstance(models["preset"], str):
            raise ValueError(f"{where}: models.preset is {models['preset']!r}; it is a name")
        out["preset"] = models["preset"]
    names = models.get("names")
    if names is None:
        rows = models.get("rows")
        if isinstance(rows, list):
            names = [r.get("model") if isinstance(r, dict) else r for r in rows]
    names = _list(where, "models.names", names)
    if not all(isinstance(n, str) and n in ROWS for n in names):
        raise ValueError(f"{where}: models.names {names!r}; each is one of {', '.join(ROWS)}")
    out["names"] = tuple(names)
    return out


__all__ = ["MAX_BYTES", "kernel_settings", "model_settings", "read_baseline"]
