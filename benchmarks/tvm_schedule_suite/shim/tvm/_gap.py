"""What the shim does not provide, as values that fail when used (not when imported).

A TVM test file imports many names at module level; one missing name must not make
every case of the file uncollectable.  ``gap("tvm.x.y")`` is a stand-in that raises
:class:`ShimGap` when called, indexed or read; :class:`OutOfScope` marks features the
measurement excludes on purpose (CUDA, tensor intrinsics from TVM's C++ library,
meta_schedule).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types


class ShimGap(Exception):
    """A TVM API the shim does not map onto Cuvil."""


class OutOfScope(Exception):
    """A feature outside the measurement (CUDA, C++ tensor intrinsics, meta_schedule)."""


#: TVM module prefixes whose use puts a case out of scope
OUT_OF_SCOPE = ("tvm.tir.tensor_intrin", "tvm.meta_schedule", "tvm.topi",
                "tvm.testing.tir", "tvm.contrib")


def _exc(name: str) -> Exception:
    if name.startswith(OUT_OF_SCOPE):
        return OutOfScope(f"{name}: outside the measurement")
    return ShimGap(f"{name}: not in the shim")


class Gap:
    """A missing TVM name; any use raises."""

    def __init__(self, name: str):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise _exc(self._name)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Gap(f"{self._name}.{attr}")

    def __getitem__(self, key):
        raise _exc(self._name)

    def __iter__(self):
        raise _exc(self._name)

    def __repr__(self):
        return f"<missing {self._name}>"


def gap(name: str) -> Gap:
    """A stand-in for the TVM name ``name``."""
    return Gap(name)


def module_getattr(modname: str):
    """A module ``__getattr__`` that answers missing names with gaps."""
    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Gap(f"{modname}.{attr}")
    return __getattr__


class _GapFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of ``tvm.<anything>`` the shim lacks give a module of gaps."""

    def find_spec(self, fullname, path, target=None):
        # last on sys.meta_path: every real finder has already said no
        if not fullname.startswith("tvm."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        mod = types.ModuleType(spec.name)
        mod.__path__ = []
        mod.__getattr__ = module_getattr(spec.name)
        return mod

    def exec_module(self, module):
        return None


def install_finder() -> None:
    """Put the gap finder last on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _GapFinder) for f in sys.meta_path):
        sys.meta_path.append(_GapFinder())
