"""The kernel cache as users have it: a prebuilt cache that is read-only (a container image, a
shared install) serves its build; it once refused to load it because it could not be
written, so every process fell back to the slow path."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

import attnkit.local._build as build

PROBE = r"""
#include <Python.h>
static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "NAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_NAME(void) { return PyModule_Create(&def); }
"""


def _published(root: Path, name: str) -> Path:
    """A good build of extension ``name`` published in the cache ``root`` as attnkit
    publishes one (``root/name/name.so``), compiled directly (a second, not a torch build)."""
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    folder = root / name
    folder.mkdir(parents=True)
    source = root / "probe.cpp"
    source.write_text(PROBE.replace("NAME", name))
    include = sysconfig.get_paths()["include"]
    so = folder / f"{name}.so"
    subprocess.run([cxx, "-shared", "-fPIC", f"-I{include}", str(source), "-o", str(so)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return so


def test_a_read_only_cache_holding_a_good_build_is_loaded(tmp_path, monkeypatch):
    name = "attnkit_read_only_probe"
    _published(tmp_path, name)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))

    def read_only(folder: Path) -> None:  # what _make_folder meets on a read-only file system
        raise build.BuildError(
            f"the build cache {folder} cannot be written (Read-only file system); "
            "set TORCH_EXTENSIONS_DIR to a writable folder"
        )

    monkeypatch.setattr(build, "_make_folder", read_only)  # root writes through mode bits
    module = build.load_or_build(name, [], [], say=False)
    assert module.answer() == 42
    assert not (tmp_path / name / build.LOCK).exists()  # nothing written: no lock taken
