"""The target registry: one entry per target kind (``llvm``, later ``cuda``, accelerators).

A target kind is any object with

* ``name`` — the string users pass to ``targets.build`` (``"llvm"``);
* ``pipeline(target) -> passes`` — the lowering passes for a target of this kind (a
  method, called at each lowering), or instead ``passes`` — a fixed list of
  ``PrimFunc -> PrimFunc`` passes, ``None`` for the default pipeline of
  :mod:`cuvil_tir.transform`;
* ``codegen(lowered_func, target) -> source`` — the lowered function as source text;
* ``runtime(source, target, signature) -> runtime module`` — compiles the source;
  the runtime module has ``entry_name``, ``get_source(fmt)``, ``source_formats`` and
  ``raw`` (the native entry taking the checked arguments, see :mod:`targets.module`);

and optionally ``options`` (``{name: default}``, the options a :class:`Target` of
this kind accepts).  Built-in kinds register themselves through this same function.

The kind's pipeline is written into the one pipeline registry of
:mod:`cuvil_tir.transform` (and removed from it by :func:`unregister_target`), so
``T.lower(f, target)`` and ``targets.build(f, target)`` always run the same passes.

Example::

    >>> import targets
    >>> "llvm" in targets.list_targets()
    True
"""

from __future__ import annotations

from cuvil_tir import transform
from cuvil_tir.errors import TargetError

_KINDS: dict[str, object] = {}


def _kind_pipeline(kind, name: str):
    method = getattr(kind, "pipeline", None)
    if method is not None:
        if not callable(method):
            raise TargetError(f"register_target: 'pipeline' of target {name!r} is not "
                              "callable (expected pipeline(target) -> list of passes)")
        return method
    passes = getattr(kind, "passes", None)
    if passes is not None:
        passes = list(passes)
        for p in passes:
            if not callable(p):
                raise TargetError(f"register_target: pass {p!r} of target {name!r} is "
                                  "not callable (a pass is PrimFunc -> PrimFunc)")
    # read at each lowering, so the registry never holds a stale copy of kind.passes
    return lambda target: kind.passes


def _resolve(text: str):
    from .target import as_target  # target imports this module
    kind = text.split()[0] if text.split() else text
    return as_target(text) if kind in _KINDS else None


def register_target(kind, replace: bool = False):
    """Register a target kind; ``replace=True`` overrides an existing one.

    Its pipeline becomes the lowering pipeline of that name, so
    ``T.lower(func, kind.name)`` lowers for it exactly as ``build`` does.  Returns ``kind``, so it can be used
    as a class decorator on an instance-producing expression.

    Example::

        >>> import targets
        >>> class Mine:
        ...     name = "doc-cpu"
        ...     passes = None
        ...     codegen = targets.get_target_kind("llvm").codegen
        ...     runtime = targets.get_target_kind("llvm").runtime
        >>> _ = targets.register_target(Mine())
        >>> "doc-cpu" in targets.list_targets()
        True
    """
    name = getattr(kind, "name", None)
    if not isinstance(name, str) or not name:
        raise TargetError(f"register_target: a target kind needs a non-empty string "
                          f"'name', found {name!r} on {kind!r}")
    for attr in ("codegen", "runtime"):
        if not callable(getattr(kind, attr, None)):
            raise TargetError(f"register_target: target kind {name!r} needs a callable "
                              f"'{attr}' (see targets.registry for the interface)")
    if name in _KINDS and not replace:
        raise TargetError(f"register_target: a target named {name!r} is already "
                          "registered; pass replace=True to override it")
    transform.register_pipeline(name, pipeline=_kind_pipeline(kind, name))
    _KINDS[name] = kind
    return kind


def get_target_kind(name: str):
    """The registered kind called ``name``, or ``TargetError`` listing the known ones.

    Example::

        >>> import targets
        >>> targets.get_target_kind("llvm").name
        'llvm'
    """
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        raise TargetError(f"unknown target {name!r}; registered targets: "
                          f"{', '.join(sorted(_KINDS)) or '(none)'}. Register a new one "
                          "with targets.register_target(kind)") from None


def list_targets() -> list[str]:
    """Names of the registered target kinds, sorted.

    Example::

        >>> import targets
        >>> isinstance(targets.list_targets(), list)
        True
    """
    return sorted(_KINDS)


def unregister_target(name: str) -> None:
    """Remove a kind and its lowering pipeline (tests and notebooks that re-register).

    Example::

        >>> import targets
        >>> targets.unregister_target("doc-cpu") if "doc-cpu" in targets.list_targets() else None
    """
    get_target_kind(name)
    del _KINDS[name]
    transform.unregister_pipeline(name)


transform.set_target_resolver(_resolve)
