"""Outlining: a statement of a host function becomes a function of the module, and the
host launches it.  One pass shape for CPU threads, GPU kernels and accelerator programs.

Every outlined function is built the same way (:func:`outline_stmt`, on the capture
analysis :func:`cuvil_tir.analysis.capture.capture`): its parameters are what the
statement uses from outside it -- buffers first (the host's parameters in its order,
then others in order of first use), then scalars -- each a fresh variable or buffer, so
the function reads (and prints) on its own.  Two passes use it:

* :func:`outline_parallel` turns every outermost ``parallel`` loop of a host function ::

      for i in T.parallel(lo, lo + n):
          body(A, B, x, i)

  into a ``parallel_task`` function of one iteration and a launch ::

      T.evaluate(T.parallel_launch("main_par0", lo, n, A, B, x))

      def main_par0(A, B, x: T.int32, i: T.int32):   # calling_conv parallel_task
          body(A, B, x, i)

  A ``parallel`` loop nested in another stays in the outer task as a loop (nested
  parallelism is serialised); the loop's annotations become the task's
  ``loop_annotations``.
* :func:`outline_device` turns every *device root* (a statement the device runs: for a
  GPU, a loop bound to a grid or block axis reached through host statements) into a
  ``device_kernel`` function whose body is that statement, and a launch with its
  dimensions as expressions of the host's values ::

      T.evaluate(T.device_launch("main_kernel0", {"blockIdx.x": (n + 127) // 128,
                                                  "threadIdx.x": 128}, A, B, n))

  The variables in the shapes of the kernel's buffers are parameters too, so the
  kernel declares its buffers from its own parameters.

The inverse, :func:`inline_launches` (how the interpreter, the verifier and the
signature read a module), is in :mod:`cuvil_tir.transform.inline`.

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
"""

from __future__ import annotations

from ..analysis.capture import capture
from ..buffer import Buffer
from ..expr import Var
from ..function import PrimFunc
from ..ir_module import (CONV_ATTR, IRModule, as_module, calling_conv, device_launch,
                         parallel_launch)
from ..stmt import Evaluate, For, Stmt
from ..visitor import Mutator, Visitor, substitute

#: the task function attribute holding the outlined loop's annotations
LOOP_ANNOTATIONS = "loop_annotations"


def outline_stmt(stmt, name: str, conv: str, first=(), index: Var | None = None,
                 shapes: bool = False, attrs: dict | None = None) -> tuple:
    """``(function, args)``: ``stmt`` as a function ``name`` of calling convention
    ``conv`` and the host's values of its parameters (buffers, then scalars).

    ``first``: the host's parameters (captured ones lead, in their order);
    ``index``: a variable bound by the caller for each run (a parallel loop's), made
    the last parameter; ``shapes``: the variables of the captured buffers' shapes are
    parameters too (see :func:`cuvil_tir.analysis.capture.capture`).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "float32", "A")
        >>> x = T.var("x", "float32")
        >>> f, args = outline_stmt(T.BufferStore(A, x, (T.const(0),)), "g", "device_kernel")
        >>> [p.name for p in f.params], [a.name for a in args], f.params[0] is A
        (['A', 'x'], ['A', 'x'], False)
    """
    cap = capture(stmt, () if index is None else (index,), shapes).ordered(first)
    vmap = {v: type(v)(v.name, v.dtype) for v in cap.scalars}
    if index is not None:
        vmap[index] = Var(index.name, index.dtype)
    bmap = {b: _copy_buffer(b, vmap) for b in cap.buffers}
    params = [bmap[b] for b in cap.buffers] + [vmap[v] for v in cap.scalars]
    if index is not None:
        params.append(vmap[index])
    fattrs = {"global_symbol": name, CONV_ATTR: conv, **(attrs or {})}
    func = PrimFunc(params, rebind(stmt, vmap, bmap), fattrs)
    return func, (*cap.buffers, *cap.scalars)


def _copy_buffer(b: Buffer, vmap: dict) -> Buffer:
    shape = tuple(substitute(x, vmap) for x in b.shape)
    strides = tuple(substitute(x, vmap) for x in b.strides)
    return b.with_changes(shape=shape, strides=strides)


def rebind(body, vmap: dict, bmap: dict):
    """``body`` with ``vmap``/``bmap`` applied, its own buffers (allocated inside it,
    whose shapes may use mapped variables) copied with mapped shapes.

    Example::

        >>> import cuvil_tir as T
        >>> i, j = T.var("i"), T.var("j")
        >>> print(rebind(T.Evaluate(i + 1), {i: j}, {}))
        T.evaluate(j + 1)
    """
    found = _Allocated()
    found.visit(body)
    bmap = dict(bmap)
    for b in found.bufs:
        bmap[b] = _copy_buffer(b, vmap)
    return substitute(body, vmap, bmap)


class _Allocated(Visitor):
    def __init__(self):
        self.bufs: list = []

    def visit_Allocate(self, s):
        self.bufs.append(s.buffer)
        self.generic_visit(s)

    def visit_Block(self, b):
        self.bufs.extend(b.alloc_buffers)
        self.generic_visit(b)


class Outliner(Mutator):
    """Outline the statements of one host function that :meth:`is_root` picks (the
    outermost ones); :meth:`outline` returns the host statement that replaces one.

    Example::

        >>> import cuvil_tir as T
        >>> Outliner(T.PrimFunc([], T.Evaluate(T.const(0))), set(), "t").fresh_name()
        'main_t0'
    """

    def __init__(self, host: PrimFunc, taken: set, suffix: str):
        self.host, self.taken, self.suffix = host, taken, suffix
        self.functions: list[PrimFunc] = []

    def is_root(self, s) -> bool:
        """Whether ``s`` is outlined."""
        raise NotImplementedError

    def outline(self, s):
        """The function for ``s`` (appended to ``functions``) and its launch."""
        raise NotImplementedError

    def visit(self, n):
        if isinstance(n, Stmt) and self.is_root(n):
            return self.outline(n)
        return super().visit(n)

    def fresh_name(self) -> str:
        """``<host>_<suffix><k>``, the first not taken in the module."""
        k = 0
        while f"{self.host.name}_{self.suffix}{k}" in self.taken:
            k += 1
        name = f"{self.host.name}_{self.suffix}{k}"
        self.taken.add(name)
        return name


def outline_module(mod, make, convs=("host",)) -> IRModule:
    """Run ``make(func, taken) -> Outliner`` over every function of ``mod`` whose
    calling convention is in ``convs``; the outlined functions follow their host.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> outline_module(f, lambda f, taken: _ParallelOutliner(f, taken)).names
        ('main',)
    """
    mod = as_module(mod)
    taken = set(mod.names)
    out = []
    for f in mod.functions:
        if calling_conv(f) not in convs:
            out.append(f)
            continue
        outliner = make(f, taken)
        body = outliner.visit(f.body)
        out.append(f if body is f.body else f.with_body(body))
        out.extend(outliner.functions)
    if len(out) == len(mod.functions) and all(a is b for a, b in zip(out, mod.functions)):
        return mod
    return IRModule(out, mod.attrs)


class _ParallelOutliner(Outliner):
    def __init__(self, host, taken):
        super().__init__(host, taken, "par")

    def is_root(self, s) -> bool:
        return isinstance(s, For) and s.kind == "parallel"

    def outline(self, s):
        attrs = {LOOP_ANNOTATIONS: dict(s.annotations)} if s.annotations else None
        name = self.fresh_name()
        task, args = outline_stmt(s.body, name, "parallel_task", self.host.params,
                                  index=s.loop_var, attrs=attrs)
        self.functions.append(task)
        return Evaluate(parallel_launch(name, s.min, s.extent, *args))


def outline_parallel(mod) -> IRModule:
    """Outline the outermost ``parallel`` loops of every host function of ``mod`` (a
    module or a PrimFunc) into ``parallel_task`` functions named ``<host>_par<k>``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> outline_parallel(f).names
        ('main',)
    """
    return outline_module(mod, _ParallelOutliner)


outline_parallel.pass_kind = "module"


class _DeviceOutliner(Outliner):
    def __init__(self, host, taken, is_root, dims_of, suffix, guard):
        super().__init__(host, taken, suffix)
        self.root, self.dims_of, self.guard = is_root, dims_of, guard

    def is_root(self, s) -> bool:
        return self.root(s)

    def outline(self, s):
        name = self.fresh_name()
        kernel, args = outline_stmt(s, name, "device_kernel", self.host.params,
                                    shapes=True)
        self.functions.append(kernel)
        dims = self.dims_of(s)
        launch = Evaluate(device_launch(name, dims, *args))
        return launch if self.guard is None else self.guard(launch, dims)


def outline_device(mod, is_root, dims_of, suffix: str = "kernel", guard=None) -> IRModule:
    """Outline every statement of the host functions of ``mod`` that ``is_root``
    picks (the outermost ones) into a ``device_kernel`` function named
    ``<host>_<suffix><k>``, launched by ``T.device_launch`` with the dimensions
    ``dims_of(statement)`` (``{axis: extent}`` in the host's variables);
    ``guard(launch, dims)``, when given, returns the host statement around the launch
    (conditions and checks on the dimensions).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> tx = T.var("tx")
        >>> k = T.For(tx, T.const(0), T.const(8), "thread_binding",
        ...           T.BufferStore(A, T.float32(1), (tx,)), "threadIdx.x")
        >>> mod = outline_device(T.PrimFunc([A], k), lambda s: s is k,
        ...                      lambda s: {"threadIdx.x": s.extent})
        >>> print(mod.entry.body)
        T.evaluate(T.device_launch("main_kernel0", {"threadIdx.x": 8}, A))
    """
    return outline_module(mod, lambda f, taken: _DeviceOutliner(f, taken, is_root,
                                                                dims_of, suffix, guard))


__all__ = ["LOOP_ANNOTATIONS", "Outliner", "outline_device", "outline_module",
           "outline_parallel", "outline_stmt", "rebind"]
