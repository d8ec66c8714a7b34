"""Outlining ``parallel`` loops into ``parallel_task`` functions of the module, and back.

:func:`outline_parallel` (a module pass) turns every outermost ``parallel`` loop of a
host function ::

    for i in T.parallel(lo, lo + n):
        body(A, B, x, i)

into a launch and a task function of one iteration ::

    T.evaluate(T.parallel_launch("main_par0", lo, n, A, B, x))

    def main_par0(A: ..., B: ..., x: T.int32, i: T.int32):   # calling_conv parallel_task
        body(A, B, x, i)

The task's parameters are what the body uses from outside it: buffers first (whole
buffers: the host's parameters in its order, then others in order of first use),
then scalars (in the same order), then the iteration index.  Each task
owns fresh variables and buffers, so it reads (and prints) on its own.  A ``parallel``
loop nested in another stays in the outer task as a loop (nested parallelism is
serialised).  The loop's annotations are kept as the task's ``loop_annotations``.
:func:`inline_parallel_tasks` is the inverse: the module's entry with every launch
replaced by the ``parallel`` loop it came from (how the interpreter runs a module).

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((64,), "float32", "A")
    >>> i = T.var("i")
    >>> f = T.PrimFunc([A], T.For(i, T.const(0), T.const(64), "parallel",
    ...                 T.BufferStore(A, T.float32(1), (i,))))
    >>> mod = outline_parallel(f)
    >>> mod.names
    ('main', 'main_par0')
    >>> print(mod.entry.body)
    T.evaluate(T.parallel_launch("main_par0", 0, 64, A))
    >>> T.structural_equal(inline_parallel_tasks(mod).body, f.body)
    True
"""

from __future__ import annotations

from ..buffer import Buffer
from ..errors import LoweringError
from ..expr import Var
from ..function import PrimFunc
from ..ir_module import (CONV_ATTR, IRModule, as_module, calling_conv, is_launch,
                         launch_parts, parallel_launch)
from ..stmt import Evaluate, For
from ..visitor import Mutator, Visitor, substitute

#: the task function attribute holding the outlined loop's annotations
LOOP_ANNOTATIONS = "loop_annotations"


def outline_parallel(mod) -> IRModule:
    """Outline the outermost ``parallel`` loops of every host function of ``mod`` (a
    module or a PrimFunc) into ``parallel_task`` functions named ``<host>_par<k>``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> outline_parallel(f).names
        ('main',)
    """
    mod = as_module(mod)
    taken = set(mod.names)
    out = []
    for f in mod.functions:
        if calling_conv(f) != "host":
            out.append(f)
            continue
        outliner = _Outliner(f, taken)
        body = outliner.visit(f.body)
        out.append(f.with_body(body))
        out.extend(outliner.tasks)
    if len(out) == len(mod.functions) and all(a is b for a, b in zip(out, mod.functions)):
        return mod
    return IRModule(out, mod.attrs)


outline_parallel.pass_kind = "module"


class _Outliner(Mutator):
    def __init__(self, host: PrimFunc, taken: set):
        self.host, self.taken = host.name, taken
        # the host's parameters come first, in its order: the launch reads like a call
        self.rank = {id(p): k for k, p in enumerate(host.params)}
        self.tasks: list[PrimFunc] = []

    def visit_For(self, s):
        if s.kind != "parallel":
            return self.generic_visit(s)
        name = self.fresh_name()
        bufs, scalars = (sorted(x, key=lambda v: self.rank.get(id(v), len(self.rank)))
                         for x in captures(s))
        vmap = {v: type(v)(v.name, v.dtype) for v in scalars}
        index = Var(s.loop_var.name, s.loop_var.dtype)
        vmap[s.loop_var] = index
        bmap = {b: _copy_buffer(b, vmap) for b in bufs}
        attrs = {"global_symbol": name, CONV_ATTR: "parallel_task"}
        if s.annotations:
            attrs[LOOP_ANNOTATIONS] = dict(s.annotations)
        params = [bmap[b] for b in bufs] + [vmap[v] for v in scalars] + [index]
        self.tasks.append(PrimFunc(params, _rebind(s.body, vmap, bmap), attrs))
        return Evaluate(parallel_launch(name, s.min, s.extent, *bufs, *scalars))

    def fresh_name(self) -> str:
        k = 0
        while f"{self.host}_par{k}" in self.taken:
            k += 1
        name = f"{self.host}_par{k}"
        self.taken.add(name)
        return name


def _copy_buffer(b: Buffer, vmap: dict) -> Buffer:
    shape = tuple(substitute(x, vmap) for x in b.shape)
    strides = tuple(substitute(x, vmap) for x in b.strides)
    return b.with_changes(shape=shape, strides=strides)


def _rebind(body, vmap: dict, bmap: dict):
    """``body`` with ``vmap``/``bmap`` applied, its own buffers (allocated inside it,
    whose shapes may use mapped variables) copied with mapped shapes."""
    found = _Uses()
    found.visit(body)
    bmap = dict(bmap)
    for b in found.bufs.values():
        if id(b) in found.own_bufs:
            bmap[b] = _copy_buffer(b, vmap)
    return substitute(body, vmap, bmap)


def captures(loop: For) -> tuple[list, list]:
    """``(buffers, scalars)`` that ``loop``'s body uses and does not define itself
    (allocations, loop, let and block variables inside it are its own), in order of
    first use; the loop's own variable is not among them.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> i, x = T.var("i"), T.var("x")
        >>> bufs, vs = captures(T.For(i, T.const(0), T.const(8), "parallel",
        ...                           T.BufferStore(A, T.cast(x, "float32"), (i,))))
        >>> [b.name for b in bufs], [v.name for v in vs]
        (['A'], ['x'])
    """
    found = _Uses()
    found.bound.add(id(loop.loop_var))
    found.visit(loop.body)
    bufs = [b for b in found.bufs.values() if id(b) not in found.own_bufs]
    scalars = [v for v in found.vars.values() if id(v) not in found.bound]
    return bufs, scalars


class _Uses(Visitor):
    def __init__(self):
        self.vars: dict[int, Var] = {}
        self.bound: set[int] = set()
        self.bufs: dict[int, Buffer] = {}
        self.own_bufs: set[int] = set()

    def visit_Var(self, v):
        self.vars.setdefault(id(v), v)

    def visit_buffer(self, b):
        self.bufs.setdefault(id(b), b)

    def _bind(self, v, n):
        self.bound.add(id(v))
        self.generic_visit(n)

    def visit_For(self, s):
        self._bind(s.loop_var, s)

    def visit_LetStmt(self, s):
        self._bind(s.var, s)

    def visit_Let(self, e):
        self._bind(e.var, e)

    def visit_IterVar(self, iv):
        self._bind(iv.var, iv)

    def _own(self, b):
        # an allocation's size is computed where it is: its shape's variables are used
        self.own_bufs.add(id(b))
        self.visit_buffer(b)
        self.visit(b.shape)
        self.visit(b.strides)

    def visit_Allocate(self, s):
        self._own(s.buffer)
        self.generic_visit(s)

    def visit_Block(self, b):
        for x in b.alloc_buffers:
            self._own(x)
        self.generic_visit(b)


def inline_parallel_tasks(mod, func: PrimFunc | None = None) -> PrimFunc:
    """The entry of ``mod`` (or its host function ``func``) with every
    ``T.parallel_launch`` replaced by the ``parallel`` loop it stands for (the task's
    body with its parameters bound to the launch's arguments); a PrimFunc is returned
    unchanged.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> inline_parallel_tasks(T.IRModule.from_func(f)).body.value.value
        0
    """
    if isinstance(mod, PrimFunc):
        return mod
    if not isinstance(mod, IRModule):
        raise LoweringError(f"inline_parallel_tasks: expected an IRModule or a PrimFunc, "
                            f"found {type(mod).__name__}")
    func = mod.entry if func is None else func
    return func.with_body(_Inliner(mod, func.name).visit(func.body))


class _Inliner(Mutator):
    def __init__(self, mod: IRModule, where: str):
        self.mod, self.where = mod, where

    def visit_Evaluate(self, s):
        if not is_launch(s.value):
            return self.generic_visit(s)
        name, lo, extent, args = launch_parts(s.value)
        task = task_of(self.mod, name, args, self.where)
        *params, index = task.params
        vmap, bmap = {}, {}
        for p, a in zip(params, args):
            if isinstance(p, Buffer):
                bmap[p] = a
            else:
                vmap[p] = a
        i = Var(index.name, index.dtype)
        vmap[index] = i
        ann = task.attr(LOOP_ANNOTATIONS) or {}
        return For(i, lo, extent, "parallel", _rebind(task.body, vmap, bmap),
                   annotations=ann)


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
    if name not in mod:
        raise LoweringError(f"{where} launches parallel task {name!r}, which the module does "
                            f"not have; it has {', '.join(mod.names)}")
    task = mod[name]
    if calling_conv(task) != "parallel_task":
        raise LoweringError(f"{where} launches {name!r} as a parallel task, but its "
                            f"calling_conv is {calling_conv(task)!r}; set "
                            "T.func_attr({'calling_conv': 'parallel_task'})")
    if len(task.params) != len(args) + 1:
        raise LoweringError(f"{where} launches parallel task {name!r} with {len(args)} "
                            f"argument(s); it takes {len(task.params) - 1} plus the "
                            "iteration index")
    for k, (p, a) in enumerate(zip(task.params, args)):
        if isinstance(p, Buffer) != isinstance(a, Buffer) or p.dtype != a.dtype:
            what = f"buffer of {p.dtype}" if isinstance(p, Buffer) else p.dtype
            got = f"buffer {a.name}" if isinstance(a, Buffer) else f"a value of {a.dtype}"
            raise LoweringError(f"{where} launches parallel task {name!r} with {got} as "
                                f"argument {k} ({p.name}); it expects a {what}")
    if not isinstance(task.params[-1], Var):
        raise LoweringError(f"parallel task {name!r}: its last parameter is the iteration "
                            f"index, a scalar integer; found buffer {task.params[-1].name}")
    return task
