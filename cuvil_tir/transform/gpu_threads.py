"""Device kernels in lowered IR: finding them, normalising their thread bindings, and
outlining them into ``device_kernel`` functions.

A *kernel* is a statement whose root is a loop bound to a launched thread axis (an
axis of level ``grid`` or ``thread``, :mod:`cuvil_tir.thread_axes`) reached from the
function body through host statements only (sequences, ``Allocate`` of ``global``
buffers, serial loops, lets and conditions, which the host runs).  Inside a kernel
every loop bound to one axis stands for the same hardware index:

* :func:`normalize_thread_bindings` gives all loops of an axis in a kernel one
  variable and one extent, the launch dimension (the largest of them); a loop with a
  smaller extent gets the guard ``if tx < extent`` (sibling loops bound to one axis
  with different extents).  ``virtual`` axes (``vthread``) become serial loops.  A
  loop bound to an axis inside another loop bound to it (MetaSchedule's cooperative
  fetching) is the same index: each thread runs its body once, for its own index
  (allowed when the body does not read the outer index and can be repeated).  A
  symbolic extent of a ``thread`` axis, an extent over the limit the target declares
  for its axis, or more threads per block than the target allows is a
  ``LoweringError``.
* :func:`grid_roots` gives a kernel without a ``blockIdx`` loop one of extent 1 (its
  one block, explicitly: per-block memory is then placed inside the kernel).
* :func:`split_host_device` checks that nothing but host statements lies outside
  kernels and outlines each kernel into a ``device_kernel`` function of the module
  (``<func>_kernel<k>``, :func:`cuvil_tir.transform.outline.outline_device`),
  launched by ``T.device_launch`` with its dimensions.
* :func:`launch_dims` reads a kernel's launch dimensions, :func:`launch_shape` the
  grid and block sizes they make.

The limits come from the target of the current ``PassContext`` (its kind's declared
``axes`` and ``max_threads``); without a target only the structure is checked.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((8,), "float32", "A")
    >>> i = T.var("i")
    >>> k = T.For(i, T.const(0), T.const(8), "thread_binding",
    ...           T.BufferStore(A, T.const(1.0), (i,)), "threadIdx.x")
    >>> mod = split_host_device(normalize_thread_bindings(T.PrimFunc([A], k)))
    >>> mod.names, launch_dims(mod["main_kernel0"].body)["threadIdx.x"].value
    (('main', 'main_kernel0'), 8)
"""

from __future__ import annotations

from .. import dtype as D
from ..errors import LoweringError
from ..expr import BufferLoad, Call, IntImm, LT, Max, StringImm, Var
from ..function import PrimFunc
from ..printer import to_text
from ..ops.gpu import SYNC_OP
from ..stmt import (Allocate, AssertStmt, Block, BlockRealize, BufferStore, Evaluate, For,
                    IfThenElse, LetStmt, SeqStmt, seq)
from ..thread_axes import launch_index, thread_axis
from ..visitor import Mutator, post_order_visit, substitute, used_vars
from .outline import outline_device
from .pass_manager import PassContext
from ..ir_module import as_module, calling_conv


def is_thread_loop(s) -> bool:
    """A loop bound to a launched thread axis (``blockIdx``/``threadIdx``, not
    ``vthread``).

    Example::

        >>> import cuvil_tir as T
        >>> is_thread_loop(T.For(T.var("i"), T.const(0), T.const(2), "serial", T.Evaluate(T.const(0))))
        False
    """
    return (isinstance(s, For) and s.kind == "thread_binding"
            and thread_axis(s.thread_tag).launched)


def host_children(s) -> list:
    """The statements the host runs inside ``s`` (empty for a kernel or a leaf).

    Example::

        >>> import cuvil_tir as T
        >>> host_children(T.SeqStmt((T.Evaluate(T.const(0)),)))[0].value.value
        0
    """
    if isinstance(s, SeqStmt):
        return list(s.seq)
    if isinstance(s, IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    if isinstance(s, (LetStmt, Allocate)) or (isinstance(s, For) and not is_thread_loop(s)):
        return [s.body]
    return []


def kernels(body) -> list:
    """The kernel roots under ``body``, in program order (a ``device_kernel``
    function's body is its one kernel).

    Example::

        >>> import cuvil_tir as T
        >>> kernels(T.Evaluate(T.const(0)))
        []
    """
    if is_thread_loop(body):
        return [body]
    out = []
    for c in host_children(body):
        out.extend(kernels(c))
    return out


def thread_loops(kernel) -> list:
    """Every launched-axis loop inside ``kernel`` (itself included).

    Example::

        >>> import cuvil_tir as T
        >>> thread_loops(T.Evaluate(T.const(0)))
        []
    """
    out = []

    def walk(n):
        if isinstance(n, For):
            if is_thread_loop(n):
                out.append(n)
            walk(n.body)
        elif isinstance(n, SeqStmt):
            for c in n.seq:
                walk(c)
        elif isinstance(n, IfThenElse):
            walk(n.then_case)
            if n.else_case is not None:
                walk(n.else_case)
        elif isinstance(n, (LetStmt, Allocate)):
            walk(n.body)
        elif isinstance(n, BlockRealize):   # block-level IR (the interpreter runs it)
            walk(n.block)
        elif isinstance(n, Block):
            walk(n.body)
    walk(kernel)
    return out


def launch_dims(kernel) -> dict:
    """``{tag: extent}`` of the axes a normalised kernel binds, outermost first.

    Example::

        >>> import cuvil_tir as T
        >>> launch_dims(T.Evaluate(T.const(0)))
        {}
    """
    dims = {}
    for loop in thread_loops(kernel):
        dims.setdefault(loop.thread_tag, loop.extent)
    return dims


def launch_shape(dims: dict) -> tuple:
    """``(grid, block)``: three extents each (x, y, z) from ``{tag: extent}``
    (expressions or ints); an axis not given is 1.

    Example::

        >>> launch_shape({"blockIdx.x": 4, "threadIdx.y": 2})
        ((4, 1, 1), (1, 2, 1))
    """
    grid, block = [1, 1, 1], [1, 1, 1]
    for tag, extent in dims.items():
        axis = thread_axis(tag)
        (grid if axis.level == "grid" else block)[axis.dim] = extent
    return tuple(grid), tuple(block)


def thread_vars(kernel) -> dict:
    """``{tag: Var}`` of a normalised kernel.

    Example::

        >>> thread_vars(None)
        {}
    """
    return {loop.thread_tag: loop.loop_var for loop in thread_loops(kernel)} if kernel else {}


def declared_limits() -> tuple:
    """``(limit by tag, threads per block)`` the current target's kind declares (its
    ``axes`` and ``max_threads``); ``({}, None)`` without a target.

    Example::

        >>> declared_limits()
        ({}, None)
    """
    target = PassContext.current().target
    if target is None or isinstance(target, str):
        return {}, None
    kind = target.kind_obj
    return ({a.tag: a.limit for a in kind.axes if a.limit is not None}, kind.max_threads)


class _Normalize(Mutator):
    """One kernel: one variable and one extent per axis, guards for smaller loops."""

    def __init__(self, func, kernel):
        self.func = func
        self.var, self.extent = {}, {}
        for loop in thread_loops(kernel):
            self.check(loop)
            tag = loop.thread_tag
            self.var.setdefault(tag, loop.loop_var)
            old = self.extent.get(tag)
            if old is None or to_text(old) == to_text(loop.extent):
                self.extent[tag] = loop.extent
            elif isinstance(old, IntImm) and isinstance(loop.extent, IntImm):
                self.extent[tag] = IntImm(max(old.value, loop.extent.value), old.dtype)
            else:
                self.extent[tag] = Max(old, loop.extent)
        self.check_limits()
        self.active: dict = {}      # tag -> extent of the enclosing loop bound to it

    def check(self, loop) -> None:
        tag = loop.thread_tag
        if not (isinstance(loop.min, IntImm) and loop.min.value == 0):
            raise LoweringError(f"loop {loop.loop_var.name} bound to {tag} starts at "
                                f"{loop.min}; a thread loop must start at 0:\n"
                                + to_text(self.func, highlight=loop))
        if thread_axis(tag).level == "thread" and not isinstance(loop.extent, IntImm):
            raise LoweringError(f"loop {loop.loop_var.name} bound to {tag} has the "
                                f"symbolic extent {loop.extent}; the threads of a block "
                                "are a constant count: split the loop by a constant "
                                "and bind the inner loop:\n"
                                + to_text(self.func, highlight=loop))

    def check_limits(self) -> None:
        limits, max_threads = declared_limits()
        block = {t: e for t, e in self.extent.items() if thread_axis(t).level == "thread"}
        total = 1
        for e in block.values():
            total *= e.value
        if max_threads is not None and total > max_threads:
            dims = ", ".join(f"{t}={e}" for t, e in block.items())
            raise LoweringError(f"a kernel of {self.func.name} has {total} threads per "
                                f"block ({dims}); a block of this target holds at most "
                                f"{max_threads}: bind smaller loops to threadIdx and move "
                                "the rest to blockIdx or a serial loop")
        for tag, extent in self.extent.items():
            limit = limits.get(tag)
            if limit is not None and isinstance(extent, IntImm) and extent.value > limit:
                raise LoweringError(f"a kernel of {self.func.name} binds {extent.value} "
                                    f"iterations to {tag}; the target allows at most "
                                    f"{limit}: split the loop and bind the rest to "
                                    "another axis or a serial loop")

    def visit_For(self, loop):
        if loop.kind == "thread_binding" and not thread_axis(loop.thread_tag).launched:
            return For(loop.loop_var, loop.min, loop.extent, "serial", self.visit(loop.body),
                       None, loop.annotations)
        if not is_thread_loop(loop):
            return self.generic_visit(loop)
        tag = loop.thread_tag
        var, launch = self.var[tag], self.extent[tag]
        if tag in self.active:
            return self.nested(loop, var)
        self.active[tag] = loop.extent
        try:
            body = loop.body if loop.loop_var is var else substitute(loop.body, {loop.loop_var: var})
            body = self.visit(body)
        finally:
            del self.active[tag]
        if to_text(loop.extent) != to_text(launch):
            body = IfThenElse(LT(var, loop.extent), body)
        return For(var, loop.min, launch, "thread_binding", body, tag, loop.annotations)

    def nested(self, loop, var):
        """A loop bound to an axis inside another loop bound to it (cooperative
        fetching: a copy under ``compute_at`` inside the thread loops, its loops bound
        to them again): the same hardware index, so each thread runs the inner body
        once, for its own index, where the loops as written run it once per outer
        iteration.  That is the same only if the body does not read the outer index
        and gives the same result when repeated."""
        tag, outer = loop.thread_tag, self.active[loop.thread_tag]
        why = None
        if any(v is var for v in used_vars(loop.body)):
            why = "its body reads the outer loop's index"
        elif not _repeatable(loop.body):
            why = "its body reads a buffer it writes, so running it once per thread " \
                  "differs from running it once per iteration of the outer loop"
        elif not (isinstance(loop.extent, IntImm) and isinstance(outer, IntImm)
                  and loop.extent.value <= outer.value):
            why = f"its extent {loop.extent} exceeds the outer loop's {outer}: threads " \
                  "outside the outer loop would have to run it"
        if why is not None:
            raise LoweringError(f"loop {loop.loop_var.name} is bound to {tag} inside "
                                f"another loop bound to {tag} (one hardware index for "
                                f"both), but {why}:\n"
                                + to_text(self.func, highlight=loop))
        body = self.visit(substitute(loop.body, {loop.loop_var: var}))
        if to_text(loop.extent) != to_text(outer):
            body = IfThenElse(LT(var, loop.extent), body)
        return body


def _repeatable(stmt) -> bool:
    """Whether running ``stmt`` twice leaves what running it once does: it reads no
    buffer it writes."""
    reads, writes = set(), set()

    def look(n):
        if isinstance(n, BufferLoad):
            reads.add(id(n.buffer))
        elif isinstance(n, BufferStore):
            writes.add(id(n.buffer))
    post_order_visit(stmt, look)
    return not (reads & writes)


class _PerKernel(Mutator):
    def __init__(self, fn):
        self.fn = fn

    def visit_For(self, loop):
        if is_thread_loop(loop):
            return self.fn(loop)
        return self.generic_visit(loop)


def normalize_thread_bindings(func: PrimFunc) -> PrimFunc:
    """One variable and one extent per thread axis in each kernel (module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> normalize_thread_bindings(f) is f
        True
    """
    body = _PerKernel(lambda k: _Normalize(func, k).visit(k)).visit(func.body)
    return func if body is func.body else func.with_body(body)


def _one_block_region(s) -> bool:
    """Whether ``s`` launches kernels of one block each (thread loops, no grid loop)
    through host statements that can run inside a kernel."""
    found = {"thread": False, "other": False}

    def look(n):
        if is_thread_loop(n):
            found["thread" if thread_axis(n.thread_tag).level == "thread" else "other"] = True
        elif isinstance(n, AssertStmt) or (isinstance(n, Allocate)
                                          and n.buffer.scope == "global"):
            found["other"] = True
    post_order_visit(s, look)
    return found["thread"] and not found["other"]


class _Synced(Mutator):
    """Each kernel root followed by a barrier (a kernel's end orders its memory)."""

    def visit_For(self, loop):
        if is_thread_loop(loop):
            return SeqStmt((loop, Evaluate(Call("int32", SYNC_OP, (StringImm("global"),)))))
        return self.generic_visit(loop)


def _grid_root(body):
    tag = launch_index("grid", 0)
    return For(Var(tag.replace(".", "_"), "int32"), IntImm(0, "int32"),
               IntImm(1, "int32"), "thread_binding", body, tag)


class _GridRoots(Mutator):
    def visit_For(self, loop):
        if not is_thread_loop(loop):
            return self.generic_visit(loop)
        if thread_axis(loop.thread_tag).level == "grid":
            return loop
        return _grid_root(loop)

    def visit_SeqStmt(self, s):
        # consecutive one-block launches become one kernel of one block: the same
        # order, with a barrier where a launch ended (its shared memory lives on)
        out, run = [], []

        def flush():
            if len(run) > 1:
                out.append(_grid_root(seq(*[_Synced().visit(x) for x in run])))
            else:
                out.extend(self.visit(x) for x in run)
            run.clear()
        for c in s.seq:
            if _one_block_region(c):
                run.append(c)
                continue
            flush()
            out.append(self.visit(c))
        flush()
        if all(a is b for a, b in zip(out, s.seq)) and len(out) == len(s.seq):
            return s
        return seq(*out)


def grid_roots(func: PrimFunc) -> PrimFunc:
    """Every kernel whose outermost bound loop is a ``thread`` axis gets a loop of
    extent 1 bound to the first ``grid`` axis around it: a launch of one block, as
    without it, with the block explicit (blocks of IR included).  Consecutive
    statements that launch such kernels (through host loops) become one kernel of one
    block, a barrier where each launch ended: the same order, and ``shared`` memory
    one of them writes and the next reads (as TensorIR allows) lives on.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> tx = T.var("tx")
        >>> f = T.PrimFunc([A], T.For(tx, T.const(0), T.const(8), "thread_binding",
        ...                           T.BufferStore(A, T.const(1.0), (tx,)), "threadIdx.x"))
        >>> print(grid_roots(f).body)
        for blockIdx_x in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(8, thread="threadIdx.x"):
                A[tx] = T.float32(1)
    """
    body = _GridRoots().visit(func.body)
    return func if body is func.body else func.with_body(body)


def _host_check(func, s) -> None:
    if is_thread_loop(s):
        return
    kids = host_children(s)
    if isinstance(s, Allocate) and s.buffer.scope != "global":
        raise LoweringError(f"buffer {s.buffer.name} in scope {s.buffer.scope!r} is "
                            "allocated outside every kernel; use it only under loops bound "
                            "to blockIdx/threadIdx:\n" + to_text(func, highlight=s))
    if not kids and not (isinstance(s, SeqStmt)):
        raise LoweringError(f"this statement of {func.name} runs on the host, outside "
                            "every loop bound to blockIdx/threadIdx; bind its loops (a "
                            "GPU build runs all computation in kernels):\n"
                            + to_text(func, highlight=s))
    for c in kids:
        _host_check(func, c)


def split_host_device(mod):
    """Check that only host statements lie outside kernels in every host function of
    ``mod`` (a module or a PrimFunc), then outline each kernel into a
    ``device_kernel`` function launched with its dimensions (module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "float32", "A")
        >>> try:
        ...     split_host_device(T.PrimFunc([A], T.BufferStore(A, T.const(0.0), (T.const(0),))))
        ... except T.LoweringError as err:
        ...     print(str(err).split(",")[0])
        [CVL-E104] this statement of main runs on the host
    """
    mod = as_module(mod)
    for f in mod.functions:
        if calling_conv(f) == "host":
            _host_check(f, f.body)
    return outline_device(mod, is_thread_loop, launch_dims, guard=launch_guard)


split_host_device.pass_kind = "module"


def launch_guard(launch, dims: dict):
    """``launch`` run only when every symbolic extent of ``dims`` is positive (an
    empty grid launches nothing), after a check of each against the limit the
    target declares for its axis.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> s = T.Evaluate(T.device_launch("k", {"blockIdx.x": n}))
        >>> print(launch_guard(s, {"blockIdx.x": n}))
        if n > 0:
            T.evaluate(T.device_launch("k", {"blockIdx.x": n}))
    """
    symbolic = [(t, e) for t, e in dims.items() if not isinstance(e, IntImm)]
    if not symbolic:
        return launch
    limits, _ = declared_limits()
    checks = []
    for tag, e in symbolic:
        limit = limits.get(tag)
        if limit is not None and limit < (1 << (D.bits(e.dtype) - 1)) - 1:
            checks.append(AssertStmt(e <= limit, f"the launch of {{}} blocks along {tag} "
                                     f"exceeds the target's limit of {limit}; split the "
                                     "loop bound to it", (e,)))
    body = SeqStmt((*checks, launch)) if checks else launch
    cond = None
    for _, e in symbolic:
        c = e > 0
        cond = c if cond is None else cond & c
    return IfThenElse(cond, body)


__all__ = ["declared_limits", "grid_roots", "host_children", "is_thread_loop", "kernels", "launch_dims",
           "launch_shape", "normalize_thread_bindings", "split_host_device", "thread_loops",
           "thread_vars"]
