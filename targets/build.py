"""``build``: schedule, PrimFunc or IRModule -> lowering passes (a module) -> codegen ->
runtime -> Module.

Example::

    >>> import numpy as np, cuvil_tir as T, targets
    >>> n = T.size_var("n")
    >>> A = T.placeholder((n,), name="A")
    >>> B = T.compute((n,), lambda i: A[i] * A[i], name="B")
    >>> mod = targets.build(T.create_prim_func([A, B]), "llvm", name="square")
    >>> b = np.zeros(3, "float32"); mod(np.arange(3, dtype="float32"), b); b.tolist()
    [0.0, 1.0, 4.0]
"""

from __future__ import annotations

import re

from cuvil_tir.errors import CodegenError, TargetError
from cuvil_tir import transform
from cuvil_tir.function import PrimFunc
from cuvil_tir.ir_module import IRModule, single_function
from cuvil_tir.transform.inline import inline_launches

from . import cache
from .cache.builds import cache_key, cacheable, entry_of, module_of
from .memory import check_memories
from .module import Module
from .signature import Signature
from .target import as_target


def _as_func(func_or_sch) -> PrimFunc:
    if isinstance(func_or_sch, PrimFunc):
        return func_or_sch
    if isinstance(func_or_sch, IRModule):
        return func_or_sch.entry
    func = getattr(func_or_sch, "func", None)
    if isinstance(func, PrimFunc):
        return func
    raise TargetError(f"build: expected a PrimFunc, an IRModule or a Schedule (an object "
                      f"with .func), got {type(func_or_sch).__name__}")


def _source(func) -> PrimFunc:
    """The function whose parameters a built module checks its arguments against."""
    return func.entry if isinstance(func, IRModule) else func


def lower_for(func, target) -> IRModule:
    """The module of ``func`` (a PrimFunc or an IRModule) after the lowering passes of
    ``target``'s kind: exactly ``T.lower(func, target)`` (one pipeline registry, one
    ``PassContext(target=...)``).

    Example::

        >>> import cuvil_tir as T, targets
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> T.structural_equal(lower_for(f, "llvm"), T.lower(f, "llvm"))
        True
    """
    return transform.lower(func, as_target(target))


def build(func_or_sch, target="llvm", name: str | None = None) -> Module:
    """Compile a PrimFunc (or a Schedule's current function, or an IRModule: its
    entry and the functions it uses, such as ``T.lower``'s result) for ``target``.

    ``name`` is the native symbol (default: the function's name).  The signature
    (shapes, dtypes, symbolic sizes) is read from the unlowered function, so the
    returned :class:`Module` checks arguments against what the user wrote.

    The compile cache (:mod:`targets.cache`) is looked up first: a hit skips lowering
    and the native compiler (``mod.from_cache`` is then True).

    Example::

        >>> import cuvil_tir as T, targets
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> targets.build(f).signature.describe()
        'main(X: float32(2,))'
    """
    func = _as_func(func_or_sch)
    target = as_target(target)
    kind = target.kind_obj
    name = name or func.name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise CodegenError(f"build: the function name {name!r} is not a valid symbol; "
                           "use letters, digits and underscores")
    func = func.with_attr("global_symbol", name)
    if isinstance(func_or_sch, IRModule):
        # a module (lowered or not) is built whole: its entry under the new name
        func = func_or_sch.with_entry(func)
    check_memories(func, target)
    key = None
    if cache.enabled() and cacheable(kind):
        key = cache_key(func, target)
        blobs = cache.store().get(key)
        if blobs is not None:
            mod = module_of(blobs, _source(func), target)
            if mod is not None:
                return mod
    mod = _compile(func, target, kind, name, exporting=key is not None)
    if key is not None:
        cache.store().put(key, entry_of(mod, kind))
    return mod


def _compile(func, target, kind, name, exporting: bool = False) -> Module:
    lowered = lower_for(func, target)
    user_func = _source(func)
    # the signature sees every store of the lowered code, the tasks' included
    sig = Signature.from_func(user_func, inline_launches(lowered), name)
    lowered = lowered.with_entry(lowered.entry.with_attr("global_symbol", name)
                                 .with_attr("cuvil.size_vars", sig.size_vars))
    try:
        # a kind whose codegen takes modules says so; others get the one function
        source = kind.codegen(lowered if getattr(kind, "module_codegen", False)
                              else single_function(lowered, target.kind), target)
        # a build whose artifact goes to the cache next compiles once for both
        make = getattr(kind, "runtime_for_export", None) if exporting else None
        runtime = (make or kind.runtime)(source, target, sig)
    except Exception as err:
        from cuvil_tir.transform import report_failure
        report_failure(lowered, f"codegen for {target.kind}", err)
        raise
    return Module(runtime, sig, lowered, target, source_func=user_func)
