"""Stable fingerprints: a digest of IR that persists across processes and machines.

:func:`cuvil_tir.structural_hash` uses Python's ``hash``, which is salted per process
(``PYTHONHASHSEED``) and may change between Python versions: it is for in-process
dicts only.  :func:`fingerprint` hashes a canonical serialisation instead (SHA-256 over
a token stream in which variables and buffers are numbered in the order they are
met, floats are written exactly with ``float.hex`` and strings with their length), so

* structurally equal IR (:func:`cuvil_tir.structural_equal`: equal up to renaming of
  variables and buffers) has the same fingerprint, and
* the fingerprint of the same IR is the same in every process, on every machine and
  under every Python version, so compile caches and tuning databases can key on it.

Example::

    >>> import cuvil_tir as T
    >>> i, j = T.var("i"), T.var("j")
    >>> fingerprint(i * 2 + 1) == fingerprint(j * 2 + 1)
    True
    >>> fingerprint(i + i) == fingerprint(i + j)
    False
"""

from __future__ import annotations

import hashlib

from .buffer import Buffer
from .deep import deep_ok
from .errors import CuvilError
from .expr import Var
from .node import Node, field_names
from .structural import _AFTER_BIND, _BINDS, _SCOPES

# bump when the serialisation changes: old fingerprints must not match new ones
_FORMAT = "cuvil-fingerprint-1"


class _Serializer:
    def __init__(self):
        self.index: dict[int, int] = {}
        self.out: list[str] = [_FORMAT]
        # keep numbered objects alive so their ids cannot be reused during the walk
        self._alive: list = []

    def number(self, v) -> int:
        k = len(self.index) + 1
        self.index[id(v)] = k
        self._alive.append(v)
        return k

    def var(self, v: Var, define: bool) -> None:
        if define or id(v) not in self.index:
            k = self.number(v)
        else:
            k = self.index[id(v)]
        self.out.append(f"V{type(v).__name__}:{v.dtype}:{k}")

    def buffer(self, b: Buffer) -> None:
        if id(b) in self.index:
            self.out.append(f"B@{self.index[id(b)]}")
            return
        k = self.number(b)
        self.out.append(f"B{k}:{b.dtype}:{len(b.scope)}:{b.scope}:{b.align}"
                        + (f":S{list(b.axis_separators)}" if b.axis_separators else ""))
        self.walk(b.shape)
        self.walk(b.strides)

    def node(self, x: Node) -> None:
        tx = type(x)
        if tx.__name__ in _SCOPES and self.index:
            # a function of a module is numbered on its own, as structural_equal
            # compares it: the digest of a function does not depend on its neighbours
            outer, self.index = self.index, {}
            try:
                return self.node(x)
            finally:
                self.index = outer
        names = field_names(tx)
        self.out.append(f"N{tx.__name__}:{len(names)}")
        bound = _BINDS.get(tx.__name__)
        if bound is None:
            for f in names:
                self.walk(getattr(x, f))
            return
        # as structural_equal: the bound value first, then the fresh variable, then
        # the scope in which it is visible
        for f in names:
            if f != bound and f not in _AFTER_BIND:
                self.walk(getattr(x, f))
        self.var(getattr(x, bound), define=True)
        for f in names:
            if f in _AFTER_BIND:
                self.walk(getattr(x, f))

    def walk(self, x) -> None:
        if isinstance(x, Var):
            self.var(x, define=False)
        elif isinstance(x, Buffer):
            self.buffer(x)
        elif isinstance(x, Node):
            self.node(x)
        elif x is None:
            self.out.append("0")
        elif isinstance(x, bool):
            self.out.append("T" if x else "F")
        elif isinstance(x, int):
            self.out.append(f"I{x}")
        elif isinstance(x, float):
            self.out.append(f"R{x.hex()}")
        elif isinstance(x, str):
            self.out.append(f"S{len(x)}:{x}")
        elif isinstance(x, (tuple, list)):
            self.out.append(f"L{len(x)}")
            for e in x:
                self.walk(e)
        elif isinstance(x, dict):
            items = sorted(x.items(), key=lambda kv: str(kv[0]))
            self.out.append(f"D{len(items)}")
            for k, v in items:
                self.walk(str(k))
                self.walk(v)
        else:
            raise CuvilError(f"fingerprint: expected IR (nodes, ints, floats, strings, "
                             f"tuples), found a {type(x).__name__} ({x!r}) inside it; "
                             "annotations must hold plain values to be fingerprinted")


@deep_ok
def fingerprint(func_or_module) -> str:
    """A hex SHA-256 digest of ``func_or_module`` (a PrimFunc, an IRModule, or any IR
    node), invariant under renaming of variables and buffers and identical across
    processes, machines and Python versions.

    Use it to key anything persistent (caches, tuning logs);
    :func:`cuvil_tir.structural_hash` is only valid inside one process.  A Schedule
    (an object with ``.func``) is fingerprinted by its current function.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
        >>> X = T.placeholder((4,), name="X")
        >>> g = T.create_prim_func([X, T.compute((4,), lambda k: X[k] * 2.0, name="B")])
        >>> fingerprint(f) == fingerprint(g), len(fingerprint(f))
        (True, 64)
    """
    x = func_or_module
    if not isinstance(x, Node) and isinstance(getattr(x, "func", None), Node):
        x = x.func
    if not isinstance(x, Node):
        raise CuvilError(f"fingerprint: expected a PrimFunc, an IRModule, an IR node or a "
                         f"Schedule, found {type(x).__name__}")
    s = _Serializer()
    s.walk(x)
    return hashlib.sha256("\x1f".join(s.out).encode("utf-8")).hexdigest()
