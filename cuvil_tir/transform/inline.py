"""Inlining launches: a host function with every launch replaced by what it runs.

The inverse of outlining (:mod:`cuvil_tir.transform.outline`): a
``T.parallel_launch`` becomes the ``parallel`` loop it stands for, a
``T.device_launch`` the kernel's body (its thread loops), each with the function's
parameters bound to the launch's arguments.  The interpreter, the verifier, the
signature of a built module and the tuner's features read a module this way; the
launches are checked against the functions they name (:func:`task_of`,
:func:`kernel_of`).

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.transform.outline import outline_parallel
    >>> A = T.decl_buffer((64,), "float32", "A")
    >>> i = T.var("i")
    >>> f = T.PrimFunc([A], T.For(i, T.const(0), T.const(64), "parallel",
    ...                 T.BufferStore(A, T.float32(1), (i,))))
    >>> T.structural_equal(inline_launches(outline_parallel(f)).body, f.body)
    True
"""

from __future__ import annotations

from ..buffer import Buffer
from ..errors import LoweringError
from ..expr import Var
from ..function import PrimFunc
from ..ir_module import (IRModule, calling_conv, device_launch_parts, is_device_launch,
                         is_launch, launch_parts)
from ..stmt import For
from ..structural import structural_equal
from ..visitor import Mutator, substitute
from .outline import LOOP_ANNOTATIONS, rebind
from .gpu_threads import launch_dims


def inline_launches(mod, func: PrimFunc | None = None) -> PrimFunc:
    """The entry of ``mod`` (or its host function ``func``) with every launch replaced
    by what it runs (module docstring); a PrimFunc is returned unchanged.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> inline_launches(T.IRModule.from_func(f)).body.value.value
        0
    """
    if isinstance(mod, PrimFunc):
        return mod
    if not isinstance(mod, IRModule):
        raise LoweringError(f"inline_launches: expected an IRModule or a PrimFunc, "
                            f"found {type(mod).__name__}")
    func = mod.entry if func is None else func
    last = _LAST[0]
    if last is not None and last[0] is mod and last[1] is func:
        return last[2]
    out = func.with_body(_Inliner(mod, func.name).visit(func.body))
    _LAST[0] = (mod, func, out)   # one tuple: a reader in another thread sees all or none
    return out


#: the last ``(module, host function, result)``: a build inlines the same lowered module
#: twice (the verifier, the pipeline's last pass, and the built module's signature); the
#: IR is immutable, so the result of the same objects is the same
_LAST: list = [None]


def _bind(params, args) -> tuple:
    vmap, bmap = {}, {}
    for p, a in zip(params, args):
        if isinstance(p, Buffer):
            bmap[p] = a
        else:
            vmap[p] = a
    return vmap, bmap


class _Inliner(Mutator):
    def __init__(self, mod: IRModule, where: str):
        self.mod, self.where = mod, where

    def visit_Evaluate(self, s):
        if is_device_launch(s.value):
            name, dims, args = device_launch_parts(s.value)
            kernel = kernel_of(self.mod, name, dims, args, self.where)
            vmap, bmap = _bind(kernel.params, args)
            return rebind(kernel.body, vmap, bmap)
        if not is_launch(s.value):
            return self.generic_visit(s)
        name, lo, extent, args = launch_parts(s.value)
        task = task_of(self.mod, name, args, self.where)
        *params, index = task.params
        vmap, bmap = _bind(params, args)
        i = Var(index.name, index.dtype)
        vmap[index] = i
        ann = task.attr(LOOP_ANNOTATIONS) or {}
        return For(i, lo, extent, "parallel", rebind(task.body, vmap, bmap),
                   annotations=ann)


def _function(mod, name, conv, what, where) -> PrimFunc:
    if name not in mod:
        raise LoweringError(f"{where} launches {what} {name!r}, which the module does "
                            f"not have; it has {', '.join(mod.names)}")
    f = mod[name]
    if calling_conv(f) != conv:
        raise LoweringError(f"{where} launches {name!r} as a {what}, but its "
                            f"calling_conv is {calling_conv(f)!r}; set "
                            f"T.func_attr({{'calling_conv': '{conv}'}})")
    return f


def _check_args(f, args, what, where) -> None:
    for k, (p, a) in enumerate(zip(f.params, args)):
        if isinstance(p, Buffer) != isinstance(a, Buffer) or p.dtype != a.dtype:
            want = f"buffer of {p.dtype}" if isinstance(p, Buffer) else p.dtype
            got = f"buffer {a.name}" if isinstance(a, Buffer) else f"a value of {a.dtype}"
            raise LoweringError(f"{where} launches {what} {f.name!r} with {got} as "
                                f"argument {k} ({p.name}); it expects a {want}")


def task_of(mod: IRModule, name: str, args, where: str) -> PrimFunc:
    """The ``parallel_task`` function ``name`` of ``mod`` that a launch with ``args``
    in function ``where`` runs; a missing task, another calling convention or
    arguments that do not match its parameters are a ``LoweringError``.

    Example::

        >>> import cuvil_tir as T
        >>> try:
        ...     task_of(T.IRModule.from_func(T.PrimFunc([], T.Evaluate(T.const(0)))), "t", (), "main")
        ... except T.LoweringError as err:
        ...     print(str(err).split(";")[0])
        [CVL-E104] main launches parallel task 't', which the module does not have
    """
    task = _function(mod, name, "parallel_task", "parallel task", where)
    if len(task.params) != len(args) + 1:
        raise LoweringError(f"{where} launches parallel task {name!r} with {len(args)} "
                            f"argument(s); it takes {len(task.params) - 1} plus the "
                            "iteration index")
    _check_args(task, args, "parallel task", where)
    if not isinstance(task.params[-1], Var):
        raise LoweringError(f"parallel task {name!r}: its last parameter is the iteration "
                            f"index, a scalar integer; found buffer {task.params[-1].name}")
    return task


def kernel_of(mod: IRModule, name: str, dims: dict, args, where: str) -> PrimFunc:
    """The ``device_kernel`` function ``name`` of ``mod`` that a launch over ``dims``
    with ``args`` in function ``where`` runs; a missing kernel, another calling
    convention, arguments that do not match its parameters or launch dimensions other
    than the kernel's thread loops are a ``LoweringError``.

    Example::

        >>> import cuvil_tir as T
        >>> try:
        ...     kernel_of(T.IRModule.from_func(T.PrimFunc([], T.Evaluate(T.const(0)))), "main", {}, (), "main")
        ... except T.LoweringError as err:
        ...     print(str(err).split(";")[0])
        [CVL-E104] main launches 'main' as a device kernel, but its calling_conv is 'host'
    """
    kernel = _function(mod, name, "device_kernel", "device kernel", where)
    if len(kernel.params) != len(args):
        raise LoweringError(f"{where} launches device kernel {name!r} with {len(args)} "
                            f"argument(s); it takes {len(kernel.params)}")
    _check_args(kernel, args, "device kernel", where)
    vmap, _ = _bind(kernel.params, args)
    own = {t: substitute(e, vmap) for t, e in launch_dims(kernel.body).items()}
    if set(own) != set(dims) or not all(structural_equal(own[t], dims[t]) for t in own):
        def show(d):
            return "{" + ", ".join(f"{t}: {e}" for t, e in d.items()) + "}"
        raise LoweringError(f"{where} launches device kernel {name!r} over {show(dims)}; "
                            f"its thread loops span {show(own)}: the launch dimensions "
                            "are the extents of the kernel's thread loops")
    return kernel


__all__ = ["inline_launches", "kernel_of", "task_of"]
