"""Pipelines: the default pass list, the per-target registry, and ``lower``.

Backends (the ``targets`` package, which ``cuvil_tir`` never imports) register their
pass list by target kind name; ``lower(func, target)`` runs the right one.

Example::

    >>> import cuvil_tir as T
    >>> [pass_name(p) for p in default_pipeline()]
    ['lower_blocks', 'flatten_buffers', 'simplify', 'verify']
"""

from __future__ import annotations

from ..errors import LoweringError
from ..function import PrimFunc
from .flatten_buffers import flatten_buffers
from .lower_blocks import lower_blocks
from .pass_manager import PassContext, PassManager, pass_name  # noqa: F401 - the doctests use it
from .simplify import simplify
from .verify import verify

_PIPELINES: dict[str, tuple | None] = {}


def default_pipeline() -> list:
    """``[lower_blocks, flatten_buffers, simplify, verify]`` (a fresh list).

    Example::

        >>> len(default_pipeline())
        4
    """
    return [lower_blocks, flatten_buffers, simplify, verify]


def register_pipeline(target_kind: str, passes) -> None:
    """Register the pass list of a target kind (``None``: the default pipeline).
    Registering a kind again replaces its pipeline.

    Example::

        >>> register_pipeline("doc-kind", [lower_blocks])
        >>> [pass_name(p) for p in get_pipeline("doc-kind")]
        ['lower_blocks']
    """
    if not isinstance(target_kind, str) or not target_kind:
        raise LoweringError(f"register_pipeline: expected a target kind name, found "
                            f"{target_kind!r}")
    if passes is not None:
        passes = tuple(passes)
        for p in passes:
            if not callable(p):
                raise LoweringError(f"register_pipeline({target_kind!r}): pass {p!r} is "
                                    "not callable (a pass is PrimFunc -> PrimFunc)")
    _PIPELINES[target_kind] = passes


def registered_kinds() -> list:
    """Names of the target kinds with a registered pipeline.

    Example::

        >>> isinstance(registered_kinds(), list)
        True
    """
    return sorted(_PIPELINES)


def _by_kind(kind: str) -> list:
    if kind not in _PIPELINES:
        known = ", ".join(registered_kinds()) or "(none)"
        raise LoweringError(f"lower: no pipeline registered for target kind {kind!r}; "
                            f"registered kinds: {known}. Register one with "
                            "T.transform.register_pipeline(kind, passes), or pass "
                            "target=None for the default pipeline")
    passes = _PIPELINES[kind]
    return default_pipeline() if passes is None else list(passes)


def get_pipeline(target=None) -> list:
    """The pass list for ``target``: None -> default; a kind name -> its registered
    pipeline; an object with non-None ``.passes`` -> those; an object with ``.kind``
    (a Target) -> the pipeline of that kind (the default when the kind's own
    ``passes`` is None and nothing is registered).

    Example::

        >>> [pass_name(p) for p in get_pipeline(None)][-1]
        'verify'
    """
    if target is None:
        return default_pipeline()
    if isinstance(target, str):
        return _by_kind(target)
    passes = getattr(target, "passes", None)
    if passes is not None:
        return list(passes)
    kind = getattr(target, "kind", None)
    if kind is not None:
        name = kind if isinstance(kind, str) else getattr(kind, "name", None)
        if isinstance(name, str) and name in _PIPELINES:
            return _by_kind(name)
        kind_obj = getattr(target, "kind_obj", kind)
        if getattr(kind_obj, "passes", "missing") is None:
            return default_pipeline()
        if isinstance(name, str):
            return _by_kind(name)
    raise LoweringError(f"lower: expected a target (None, a kind name, a Target or an "
                        f"object with .passes), found {target!r}")


def lower(func_or_sch, target=None) -> PrimFunc:
    """The PrimFunc after ``target``'s lowering passes (see :func:`get_pipeline`);
    accepts a PrimFunc or a Schedule (anything with ``.func``).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((2, 2), name="A")
        >>> f = T.lower(T.create_prim_func([A, T.compute((2, 2), lambda i, j: A[i, j] * 2.0, name="B")]))
        >>> print(f)
        @T.prim_func
        def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
            for i in T.serial(2):
                for j in T.serial(2):
                    B[i * 2 + j] = A[i * 2 + j] * T.float32(2)
    """
    func = func_or_sch
    if not isinstance(func, PrimFunc):
        func = getattr(func_or_sch, "func", None)
        if not isinstance(func, PrimFunc):
            raise LoweringError(f"lower: expected a PrimFunc or a Schedule (an object "
                                f"with .func), found {type(func_or_sch).__name__}")
    # a kind name carries no options; an enclosing context (targets.build) may hold
    # the full Target, which the nested context then inherits
    with PassContext(target=None if isinstance(target, str) else target):
        return PassManager(get_pipeline(target)).run(func)
