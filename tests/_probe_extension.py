"""What the kernel-build tests share: ``SOURCE``, the smallest C extension that torch's
extension loader can build (one function, ``answer() -> 42``, named by the
``TORCH_EXTENSION_NAME`` the build defines), which they compile (a second) in place of the
kernel (30 s); and ``finish``, which waits for a child process under a timeout so that a
regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

SOURCE = r"""
#include <Python.h>
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define STR_(a) #a
#define STR(a) STR_(a)
static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, STR(TORCH_EXTENSION_NAME), NULL, -1,
                                 methods};
PyMODINIT_FUNC CAT(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&def); }
"""


def finish(proc: subprocess.Popen[str], timeout: float, what: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``proc``, started with ``start_new_session=True``; past
    ``timeout`` seconds its whole process group is killed and the test fails, naming ``what``
    (the build, the child) as a hang."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{what} did not finish in {timeout} s (a hang)")
    return proc.returncode, out, err
