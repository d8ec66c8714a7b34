"""Programs in the compile cache: the key of a build.

The key is taken *before* lowering, so that a hit skips the lowering passes as well
as the code generator and the native compiler: SHA-256 over :func:`build_key` of the
unlowered function (its fingerprint, which covers the schedule, since a schedule is a
function; the resolved target; the kind's tool versions), the symbol, a digest of
Cuvil's own source files (:func:`code_identity`), the kind's
``cache_identity(target)`` (for ``c`` the compiler's version line), which kind class
and which passes build it (:func:`kind_identity`: a kind re-registered with other
passes, or edited in the user's own file, never meets its old programs), the pass
context's options and the program format.  The entry itself is the
:class:`~cuvil_tir.target.program.Program`'s blobs, for every backend.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.target import Target
    >>> f = T.create_prim_func([T.placeholder((2,), name="X")]).with_attr("global_symbol", "f")
    >>> len(cache_key(f, Target("llvm")))
    64
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import sys

from ...transform.pass_manager import PassContext, pass_name
from ..keys import build_key
from ..program import FORMAT

#: the folder holding Cuvil's packages (cuvil_tir, schedules, targets)
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@functools.lru_cache(maxsize=None)
def code_identity() -> str:
    """A digest of Cuvil's own source files (names, sizes, modification times): an
    edited or reinstalled compiler never serves entries built by the old code, even at
    the same version number.  Computed once per process (a few hundred ``stat`` calls).

    Example::

        >>> len(code_identity())
        64
    """
    h = hashlib.sha256()
    for pkg in ("cuvil_tir", "schedules", "targets"):
        for folder, dirs, files in os.walk(os.path.join(_ROOT, pkg)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith((".py", ".lark")):
                    st = os.stat(os.path.join(folder, name))
                    rel = os.path.relpath(os.path.join(folder, name), _ROOT)
                    h.update(f"{rel}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def _stamp(obj) -> str:
    """``module.qualname`` of a class or function, with the size and modification time
    of its file when that file is not one of Cuvil's own (those are in
    :func:`code_identity`)."""
    module = getattr(obj, "__module__", None) or ""
    name = f"{module}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"
    if module.split(".")[0] in ("cuvil_tir", "schedules", "targets"):
        return name
    try:
        st = os.stat(inspect.getsourcefile(sys.modules[module]))
        return f"{name}@{st.st_size}:{st.st_mtime_ns}"
    except (KeyError, TypeError, OSError):
        return name


def kind_identity(kind, target) -> list:
    """The class of ``kind`` and the passes of its pipeline for ``target``, each with
    :func:`_stamp`: what the key of a build must change with besides the code of Cuvil.

    Example::

        >>> from cuvil_tir.target import Target
        >>> kind_identity(Target("llvm").kind_obj, Target("llvm"))[0]
        'targets.llvm.LLVMTargetKind'
    """
    return [_stamp(type(kind))] + [f"{pass_name(p)}={_stamp(p)}"
                                   for p in kind.pipeline(target)]


def cache_key(func, target) -> str:
    """The cache key of building ``func`` (with its final ``global_symbol``) for
    ``target`` (a ``Target``) in the current pass context: :func:`build_key` of the
    unlowered function (fingerprint, resolved target, tool versions) plus the symbol,
    the kind's ``cache_identity``, the pass context's options and the program
    format."""
    ctx = PassContext.current()
    parts = {
        "format": FORMAT,
        "build_key": build_key(func, target),
        "symbol": func.name,
        "code": code_identity(),
        "toolchain": target.kind_obj.cache_identity(target),
        "kind": kind_identity(target.kind_obj, target),
        "pass_context": [ctx.opt_level, sorted((k, repr(v)) for k, v in ctx.config.items())],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


__all__ = ["cache_key", "code_identity", "kind_identity"]
