"""The build driver, the same for every backend: lower -> codegen -> cache -> load.

``build(func_or_sch, target)`` checks the function's memories against the target's
memory table, looks the build up in the compile cache (a hit skips lowering and code
generation), else lowers it with the kind's pipeline, reads the calling signature
from the unlowered function, asks the kind's ``codegen`` for a
:class:`~cuvil_tir.target.program.Program`, stores it, and returns the kind's
``load`` of it.  ``targets.build`` is this function; ``schedules`` (the tuner, the
debug mode) and ``T.diff`` reach backends through it and the registry alone.

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> n = T.size_var("n")
    >>> A = T.placeholder((n,), name="A")
    >>> B = T.compute((n,), lambda i: A[i] * A[i], name="B")
    >>> mod = build(T.create_prim_func([A, B]), "llvm", name="square")
    >>> b = np.zeros(3, "float32"); mod(np.arange(3, dtype="float32"), b); b.tolist()
    [0.0, 1.0, 4.0]
"""

from __future__ import annotations

import re

from ..buffer import Buffer
from ..deep import deep_ok
from ..errors import CodegenError, TargetError
from ..ir_module import IRModule
from ..transform.pass_manager import report_failure
from ..transform.inline import inline_launches
from ..visitor import Visitor
from . import cache
from .lowering import as_func, lower
from .program import Program
from .signature import Signature
from .target import as_target


class _Buffers(Visitor):
    """Every buffer a function defines or touches, in first-seen order."""

    def __init__(self):
        self.found: dict[int, Buffer] = {}

    def visit_buffer(self, b):
        self.found.setdefault(id(b), b)


def check_memories(func, target) -> None:
    """Raise ``CodegenError`` when a buffer of ``func`` (a PrimFunc, or every function
    of a module) is in a scope ``target``'s kind has no memory for (parameters,
    allocations and every accessed buffer): a typo such as
    ``cache_read(blk, 0, "locla")``, or ``"shared"`` on a CPU.

    Example::

        >>> import cuvil_tir as T
        >>> B = T.decl_buffer((4,), "float32", "B", scope="npu.wgt")
        >>> f = T.PrimFunc([B], T.Evaluate(T.const(0)))
        >>> check_memories(f, "llvm")
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.CodegenError: [CVL-E105] build: buffer 'B' is in scope 'npu.wgt', which target 'llvm' has no memory for; its memories are: global, local. Put the buffer in one of them (cache_read/cache_write/set_scope), or build for a target that has this memory
    """
    target = as_target(target)
    scopes = [m.scope for m in target.kind_obj.memories]
    walker = _Buffers()
    for f in (func.functions if isinstance(func, IRModule) else (func,)):
        for p in f.params:
            walker.visit(p)
        walker.visit(f.body)
    for buf in walker.found.values():
        if buf.scope not in scopes:
            raise CodegenError(
                f"build: buffer '{buf.name}' is in scope '{buf.scope}', which target "
                f"'{target.kind}' has no memory for; its memories are: "
                f"{', '.join(scopes) or '(none)'}. Put the buffer in one of them "
                "(cache_read/cache_write/set_scope), or build for a target that has "
                "this memory")


def lower_for(func, target) -> IRModule:
    """The module of ``func`` (a PrimFunc or an IRModule) after the lowering passes of
    ``target``'s kind: exactly ``T.lower(func, target)``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> T.structural_equal(lower_for(f, "llvm"), T.lower(f, "llvm"))
        True
    """
    return lower(func, as_target(target))


def _entry(func_or_sch):
    func = as_func(func_or_sch, "build", TargetError)
    return func.entry if isinstance(func, IRModule) else func


@deep_ok
def build(func_or_sch, target="llvm", name: str | None = None):
    """Compile a PrimFunc (or a Schedule's current function, or an IRModule: its
    entry and the functions it uses, such as ``T.lower``'s result) for ``target``;
    returns the kind's module (``mod(*arrays)``, ``mod.get_source()``, ...).

    ``name`` is the native symbol (default: the function's name).  The signature
    (shapes, dtypes, symbolic sizes) is read from the unlowered function, so the
    module checks arguments against what the user wrote.  The compile cache is looked
    up first: a hit skips lowering and code generation (``mod.from_cache``).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> build(f).signature.describe()
        'main(X: float32(2,))'
    """
    func = _entry(func_or_sch)
    target = as_target(target)
    name = name or func.name
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise CodegenError(f"build: the function name {name!r} is not a valid symbol; "
                           "use letters, digits and underscores")
    func = func.with_attr("global_symbol", name)
    whole = func_or_sch.with_entry(func) if isinstance(func_or_sch, IRModule) else func
    check_memories(whole, target)
    kind = target.kind_obj
    key = cache.cache_key(whole, target) if cache.enabled() else None
    if key is not None:
        blobs = cache.store().get(key)
        program = Program.from_blobs(blobs, func, name) if blobs is not None else None
        if program is not None and program.kind == target.kind:
            return kind.load(program, target)
    program = compile_program(whole, target, name)
    if key is not None:
        program = program.replace(build_key=key)
        cache.store().put(key, program.to_blobs())
    return kind.load(program, target)


def compile_program(func, target, name: str) -> Program:
    """Lower ``func`` (a PrimFunc named ``name``, or a module whose entry it is) for
    ``target`` and generate its :class:`Program`, with the signature of the unlowered
    entry attached (no cache involved).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> p = compile_program(f.with_attr("global_symbol", "g"), as_target("llvm"), "g")
        >>> p.entry, p.signature.describe(), sorted(p.binaries)
        ('g', 'g(X: float32(2,))', ['obj'])
    """
    lowered = lower_for(func, target)
    user_func = func.entry if isinstance(func, IRModule) else func
    # the signature sees every store of the lowered code, the tasks' included
    sig = Signature.from_func(user_func, inline_launches(lowered), name)
    lowered = lowered.with_entry(lowered.entry.with_attr("global_symbol", name)
                                 .with_attr("cuvil.size_vars", sig.size_vars))
    try:
        program = target.kind_obj.codegen(lowered, target)
    except Exception as err:
        report_failure(lowered, f"codegen for {target.kind}", err)
        raise
    if not isinstance(program, Program):
        raise TargetError(f"target kind {target.kind!r}: codegen returned "
                          f"{type(program).__name__}; a kind's codegen returns a Program")
    return program.replace(signature=sig, source_func=user_func,
                           lowered=program.lowered if program.lowered is not None
                           else lowered)


__all__ = ["build", "check_memories", "compile_program", "lower_for"]
