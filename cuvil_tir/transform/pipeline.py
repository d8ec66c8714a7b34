"""Pipelines: the default pass list, THE registry of pipelines by target kind, ``lower``.

There is one registry, and it lives here: ``targets.register_target`` writes each
kind's pipeline into it (and ``unregister_target`` removes it), so
``T.lower(f, target)`` and ``targets.build(f, target)`` run exactly the same passes
under the same ``PassContext(target=...)``.  ``cuvil_tir`` never imports ``targets``:
a kind string such as ``"llvm -mcpu=haswell"`` becomes a ``Target`` object through the
resolver that ``targets`` installs with :func:`set_target_resolver`.

A registered pipeline is a function ``pipeline(target) -> passes`` called at each
lowering (so a pass list may depend on the target's options) or a fixed list.

Example::

    >>> import cuvil_tir as T
    >>> [pass_name(p) for p in default_pipeline()]
    ['lower_blocks', 'flatten_buffers', 'simplify', 'verify']
"""

from __future__ import annotations

from ..errors import LoweringError
from ..deep import deep_ok
from ..function import PrimFunc
from ..ir_module import IRModule, as_module
from .flatten_buffers import flatten_buffers
from .lower_blocks import lower_blocks
from .pass_manager import PassContext, PassManager, pass_name  # noqa: F401 - the doctests use it
from .simplify import simplify
from .verify import verify

# kind name -> pipeline(target) -> list of passes
_PIPELINES: dict = {}
_RESOLVER = [None]


def default_pipeline() -> list:
    """``[lower_blocks, flatten_buffers, simplify, verify]`` (a fresh list).

    Example::

        >>> len(default_pipeline())
        4
    """
    return [lower_blocks, flatten_buffers, simplify, verify]


def _checked(kind: str, passes) -> list:
    if passes is None:
        return default_pipeline()
    if isinstance(passes, (str, bytes)) or not hasattr(passes, "__iter__"):
        raise LoweringError(f"pipeline of target kind {kind!r}: expected a list of passes, "
                            f"found {type(passes).__name__}")
    passes = list(passes)
    for p in passes:
        if not callable(p):
            raise LoweringError(f"pipeline of target kind {kind!r}: pass {p!r} is not "
                                "callable (a pass is PrimFunc -> PrimFunc)")
    return passes


def register_pipeline(target_kind: str, passes=None, *, pipeline=None) -> None:
    """Register the pipeline of a target kind: a fixed list ``passes`` (``None``: the
    default pipeline), or ``pipeline(target) -> passes`` called at each lowering.
    Registering a kind again replaces its pipeline.

    Example::

        >>> register_pipeline("doc-kind", [lower_blocks])
        >>> [pass_name(p) for p in get_pipeline("doc-kind")]
        ['lower_blocks']
        >>> register_pipeline("doc-kind", pipeline=lambda target: [simplify])
        >>> [pass_name(p) for p in get_pipeline("doc-kind")]
        ['simplify']
        >>> unregister_pipeline("doc-kind")
    """
    if not isinstance(target_kind, str) or not target_kind:
        raise LoweringError(f"register_pipeline: expected a target kind name, found "
                            f"{target_kind!r}")
    if pipeline is not None:
        if passes is not None or not callable(pipeline):
            raise LoweringError(f"register_pipeline({target_kind!r}): give either a list "
                                "of passes or a callable pipeline(target) -> passes")
        _PIPELINES[target_kind] = pipeline
        return
    fixed = tuple(_checked(target_kind, passes))
    _PIPELINES[target_kind] = lambda target: list(fixed)


def unregister_pipeline(target_kind: str) -> None:
    """Forget a kind's pipeline (``targets.unregister_target`` calls it); a kind that
    has none is ignored.

    Example::

        >>> register_pipeline("doc-gone", None); unregister_pipeline("doc-gone")
        >>> "doc-gone" in registered_kinds()
        False
    """
    _PIPELINES.pop(target_kind, None)


def registered_kinds() -> list:
    """Names of the target kinds with a registered pipeline.

    Example::

        >>> isinstance(registered_kinds(), list)
        True
    """
    return sorted(_PIPELINES)


def set_target_resolver(resolver) -> None:
    """Install ``resolver(text) -> target or None``: how a kind string given to
    :func:`lower` becomes a target object (``None``: not a kind the resolver knows; the
    string is then used as a bare kind name).  ``targets`` installs ``as_target``.

    Example::

        >>> set_target_resolver(_RESOLVER[0])  # re-installing the current one is harmless
    """
    if resolver is not None and not callable(resolver):
        raise LoweringError(f"set_target_resolver: expected a callable, found {resolver!r}")
    _RESOLVER[0] = resolver


def resolve_target(target):
    """``target`` with a kind string turned into a target object by the installed
    resolver; anything else is returned unchanged.

    Example::

        >>> resolve_target(None) is None
        True
    """
    if isinstance(target, str) and _RESOLVER[0] is not None:
        resolved = _RESOLVER[0](target)
        if resolved is not None:
            return resolved
    return target


def _kind_name(target):
    if isinstance(target, str):
        return target.split()[0] if target.split() else target
    kind = getattr(target, "kind", None)
    return kind if isinstance(kind, str) else getattr(kind, "name", None)


def get_pipeline(target=None) -> list:
    """The pass list for ``target``: ``None`` -> the default pipeline; a kind string or
    a target object (anything with ``.kind``) -> the pipeline registered for that kind,
    called with the target; an object with only ``.passes`` -> those passes.

    Example::

        >>> [pass_name(p) for p in get_pipeline(None)][-1]
        'verify'
    """
    if target is None:
        return default_pipeline()
    name = _kind_name(target)
    if name is None:
        passes = getattr(target, "passes", None)
        if passes is not None:
            return _checked(type(target).__name__, passes)
        raise LoweringError(f"lower: expected a target (None, a kind name, a Target or an "
                            f"object with .passes), found {target!r}")
    if name not in _PIPELINES:
        known = ", ".join(registered_kinds()) or "(none)"
        raise LoweringError(f"lower: no pipeline registered for target kind {name!r}; "
                            f"registered kinds: {known}. Register the kind with "
                            "targets.register_target(kind), or its passes with "
                            "T.transform.register_pipeline(kind, passes), or pass "
                            "target=None for the default pipeline")
    return _checked(name, _PIPELINES[name](resolve_target(target)))


@deep_ok
def lower(func_or_sch, target=None) -> IRModule:
    """The module of ``func_or_sch`` after ``target``'s lowering passes (see
    :func:`get_pipeline`): its host entry, plus the functions the passes outlined
    (``parallel_task`` functions for ``llvm``).  Accepts a PrimFunc or a Schedule
    (anything with ``.func``); ``lower(f)["main"]`` or ``.entry`` is the host function.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((2, 2), name="A")
        >>> mod = T.lower(T.create_prim_func([A, T.compute((2, 2), lambda i, j: A[i, j] * 2.0, name="B")]))
        >>> print(mod.entry)
        @T.prim_func
        def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
            T.func_attr({"calling_conv": "host", "global_symbol": "main"})
            for i in T.serial(2):
                for j in T.serial(2):
                    B[i * 2 + j] = A[i * 2 + j] * T.float32(2)
    """
    func = func_or_sch
    if not isinstance(func, (PrimFunc, IRModule)):
        func = getattr(func_or_sch, "func", None)
        if not isinstance(func, PrimFunc):
            raise LoweringError(f"lower: expected a PrimFunc, an IRModule or a Schedule "
                                f"(an object with .func), found {type(func_or_sch).__name__}")
    # the passes see the same target object targets.build gives them: a kind string is
    # resolved first (a bare name nobody resolves leaves the context's target unset,
    # inheriting an enclosing one)
    target = resolve_target(target)
    with PassContext(target=None if isinstance(target, str) else target):
        return PassManager(get_pipeline(target)).run(as_module(func))
