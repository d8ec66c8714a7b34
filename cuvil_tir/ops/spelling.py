"""How each backend writes each op: one table, filled by the backends themselves.

The op registry (:mod:`cuvil_tir.ops`) says what an op *is*; this table says how a
backend *writes* it (TVM's ``intrin_rule_<target>`` tables, tinygrad's per-renderer op
tables).  A backend registers, from its own folder, with :func:`register_backend` and
:func:`register_spelling`; the core never names a backend's syntax.

A spelling is whatever the backend's emitter understands:

* a ``str`` in the backend's own template language (a C template over ``{0}``, ``{1}``
  … and ``{f}``; an LLVM intrinsic name);
* a callable ``spelling(emitter, call)`` returning the emitted value (text, a
  register, a closure: the backend decides);
* :class:`Unsupported` (with the reason and the error class): the backend cannot write
  the op, and says so with a coded error instead of miscompiling.

:func:`spelling` looks an op up in the backend's own entries, then its ``default`` rule
(a function of the :class:`~cuvil_tir.ops.OpDef`: e.g. "a libm call for any op with a
``libm`` name", which also covers ops registered later), then its ``parent`` backend's
(CUDA C and accelerator C inherit C's), and finally returns :data:`EXPAND` when the op
has an ``expand`` (the emitter writes ``op.expand(*args)`` instead).  Anything else is a
:class:`~cuvil_tir.errors.CodegenError` naming the op, the backend and the fix.

Example::

    >>> register_backend("doc-dsp", parent=None, default=lambda op: None)
    >>> register_spelling("doc-dsp", "exp", "dsp_exp({0})")
    >>> spelling("doc-dsp", "exp"), spelling("doc-dsp", "sigmoid") is EXPAND
    ('dsp_exp({0})', True)
    >>> try:
    ...     spelling("doc-dsp", "tanh")
    ... except CodegenError as err:
    ...     print(err.code)
    CVL-E105
    >>> unregister_backend("doc-dsp")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import CodegenError, CuvilError
from . import get_op


@dataclass(frozen=True)
class Unsupported:
    """A backend's explicit "cannot write this op": looking it up raises ``error`` with
    ``reason`` (say what is refused and what to do instead).

    Example::

        >>> Unsupported("no pointers on this target").error.__name__
        'CodegenError'
    """

    reason: str
    error: type = CodegenError


class _Expand:
    """The marker :func:`spelling` returns for an op written through its ``expand``."""

    def __repr__(self):
        return "EXPAND"


#: returned by :func:`spelling` when the backend writes the op's expansion instead
EXPAND = _Expand()


@dataclass
class _Backend:
    parent: str | None
    default: Callable | None
    label: str
    entries: dict


_BACKENDS: dict[str, _Backend] = {}


def register_backend(name: str, parent: str | None = None,
                     default: Callable | None = None, label: str | None = None) -> None:
    """Declare the spelling table of backend ``name``: ``parent`` (a backend whose
    spellings it inherits), ``default`` (``default(opdef)`` gives a spelling for an op
    without an entry, or None) and ``label`` (how its errors begin; ``"<name>
    codegen"``).  Declaring it again keeps its entries.

    Example::

        >>> register_backend("doc-c2", parent="c")
        >>> backend_parent("doc-c2")
        'c'
        >>> unregister_backend("doc-c2")
    """
    if not isinstance(name, str) or not name:
        raise CuvilError(f"register_backend: the name must be a non-empty string, "
                         f"found {name!r}")
    if parent is not None and parent == name:
        raise CuvilError(f"register_backend({name!r}): a backend cannot be its own parent")
    old = _BACKENDS.get(name)
    _BACKENDS[name] = _Backend(parent, default, label or f"{name} codegen",
                               old.entries if old else {})


def unregister_backend(name: str) -> None:
    """Forget backend ``name``'s table (tests and notebooks that re-register).

    Example::

        >>> unregister_backend("doc-none")
    """
    _BACKENDS.pop(name, None)


def register_spelling(backend: str, op: str, spelling, replace: bool = True) -> None:
    """Set how ``backend`` writes ``op`` (a registered op); ``replace=False`` refuses to
    change an existing entry.

    Example::

        >>> register_backend("doc-gpu")
        >>> register_spelling("doc-gpu", "tanh", "fast_tanh({0})")
        >>> spelling("doc-gpu", "tanh")
        'fast_tanh({0})'
        >>> unregister_backend("doc-gpu")
    """
    get_op(op)
    table = _table(backend, "register_spelling")
    if not replace and op in table.entries:
        raise CuvilError(f"register_spelling: backend {backend!r} already spells op "
                         f"{op!r}; pass replace=True to change it")
    if not (isinstance(spelling, (str, Unsupported)) or callable(spelling)):
        raise CuvilError(f"register_spelling({backend!r}, {op!r}): a spelling is a str, "
                         f"a callable or Unsupported(...), found {type(spelling).__name__}")
    table.entries[op] = spelling


def register_spellings(backend: str, spellings: dict) -> None:
    """:func:`register_spelling` for each ``op: spelling`` of ``spellings``.

    Example::

        >>> register_backend("doc-many")
        >>> register_spellings("doc-many", {"sin": "s({0})", "cos": "c({0})"})
        >>> spelling("doc-many", "cos")
        'c({0})'
        >>> unregister_backend("doc-many")
    """
    for op, sp in spellings.items():
        register_spelling(backend, op, sp)


def _table(backend: str, who: str) -> _Backend:
    try:
        return _BACKENDS[backend]
    except KeyError:
        raise CodegenError(f"{who}: no spelling table for backend {backend!r}; known: "
                           f"{', '.join(sorted(_BACKENDS))} (a backend declares its "
                           "table with cuvil_tir.ops.register_backend)") from None


def backend_parent(backend: str) -> str | None:
    """The backend whose spellings ``backend`` inherits, or None.

    Example::

        >>> register_backend("doc-child", parent="doc-base")
        >>> backend_parent("doc-child")
        'doc-base'
        >>> unregister_backend("doc-child")
    """
    return _table(backend, "backend_parent").parent


def has_backend(backend: str) -> bool:
    """True when ``backend`` declared a spelling table.

    Example::

        >>> has_backend("doc-never")
        False
    """
    return backend in _BACKENDS


def backends() -> tuple:
    """Names of the backends with a spelling table, in declaration order.

    Example::

        >>> isinstance(backends(), tuple)
        True
    """
    return tuple(_BACKENDS)


def find_spelling(backend: str, op: str):
    """The spelling of ``op`` for ``backend`` (own entry, default rule, then the
    parent's), or None; :class:`Unsupported` entries are returned, not raised.

    Example::

        >>> register_backend("doc-find")
        >>> find_spelling("doc-find", "exp") is None
        True
        >>> unregister_backend("doc-find")
    """
    opdef = get_op(op)
    name, seen = backend, set()
    while name is not None and name not in seen:
        seen.add(name)
        table = _table(name, "spelling")
        if op in table.entries:
            return table.entries[op]
        if table.default is not None:
            found = table.default(opdef)
            if found is not None:
                return found
        name = table.parent
    return None


def spelling(backend: str, op: str):
    """How ``backend`` writes ``op``: its spelling, or :data:`EXPAND` when it has none
    and the op has an ``expand``; a coded error when it cannot.

    Example::

        >>> register_backend("doc-look")
        >>> register_spelling("doc-look", "exp", Unsupported("exp: no exponential unit"))
        >>> try:
        ...     spelling("doc-look", "exp")
        ... except CodegenError as err:
        ...     print(err.message)
        doc-look codegen: exp: no exponential unit
        >>> unregister_backend("doc-look")
    """
    label = _table(backend, "spelling").label
    try:
        opdef = get_op(op)
    except CuvilError as err:
        raise CodegenError(f"{label}: {err.message}") from None
    found = find_spelling(backend, op)
    if isinstance(found, Unsupported):
        raise found.error(f"{label}: {found.reason}")
    if found is not None:
        return found
    if opdef.expand is not None:
        return EXPAND
    raise CodegenError(f"{label}: no spelling of op {op!r} for backend {backend!r}; "
                       f"register one from the backend with "
                       f"cuvil_tir.ops.register_spelling({backend!r}, {op!r}, ...), or "
                       "give the op an expand (its definition in other expressions)")


__all__ = ["EXPAND", "Unsupported", "backend_parent", "backends", "find_spelling",
           "has_backend", "register_backend", "register_spelling", "register_spellings",
           "spelling", "unregister_backend"]
