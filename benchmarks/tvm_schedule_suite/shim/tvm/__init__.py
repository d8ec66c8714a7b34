"""A shim of the ``tvm`` package over Cuvil, for running TVM's schedule tests.

Only the subset of TVM's Python API that ``tests/python/tir-schedule`` uses is mapped;
every other ``tvm.*`` name imports as a stand-in that fails when used (see
:mod:`._gap`), so a missing name fails the cases that use it, not the whole file.
This package is put on ``sys.path`` by the runner only; it is not part of Cuvil.
"""

from __future__ import annotations

from ._gap import install_finder, module_getattr

install_finder()

from cuvil_tir import CuvilError as TVMError  # noqa: E402

from . import ir, runtime, script, target, te, testing, tir  # noqa: E402
from .ir import IRModule  # noqa: E402
from .runtime import compile, cpu, device  # noqa: E402

__getattr__ = module_getattr("tvm")
