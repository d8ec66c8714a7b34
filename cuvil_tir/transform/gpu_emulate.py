"""``emulate_gpu``: a lowered GPU module as one CPU function with the same GPU
semantics, for checking kernels too large for the interpreter.

The interpreter (:mod:`cuvil_tir.interp.gpu`) runs a kernel block after block and,
within a block, each statement that holds no barrier for every thread in turn; a
statement that holds one is walked once for the whole block.  This pass writes the
same execution as IR that a CPU backend compiles:

* the kernel's ``blockIdx`` loops become serial loops (the blocks, one after the
  other) and its ``threadIdx`` variables are bound from one thread counter ``t``;
* a statement without a barrier, warp shuffle or shared allocation runs as
  ``for t in range(threads)`` with ``tx, ty, tz`` bound from ``t`` (its thread loops
  dissolve: they only named the index);
* a sequence, a loop or a condition holding a barrier is kept once for the block (its
  bounds and condition are the same in every thread; they are read in thread 0),
  and the barrier itself disappears (the order of the statements is the barrier);
* a ``local`` buffer or a let that lives across a barrier gets one copy per thread
  (an extra leading dimension indexed by the thread's number), a ``shared`` buffer
  one per block;
* a warp reduction ``warp_<op>(v, width)`` stores every thread's ``v``, runs the
  butterfly of ``__shfl_xor_sync`` over them, and gives each thread its lane's value.

Tile ops (tensor cores) are refused (``LoweringError``): the interpreter runs them.
Asynchronous copies (``cp.async``) land at once, as plain stores, and their group ops
vanish: exact for a kernel whose copies are each waited for before any use, which
the interpreter's race checker checks on a small size.
The result has only ``global`` buffers and runs on ``llvm`` or ``c``.  It checks the
numbers, not races (the interpreter's ``check_races`` does).

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> A = T.decl_buffer((8,), "float32", "A")
    >>> S = T.decl_buffer((8,), "float32", "S", scope="shared")
    >>> tx = T.var("tx")
    >>> sync = T.Evaluate(T.Call("int32", "tvm_storage_sync", (T.StringImm("shared"),)))
    >>> body = T.For(tx, T.const(0), T.const(8), "thread_binding", T.Allocate(S, T.seq(
    ...     T.BufferStore(S, A[tx] * 2.0, (tx,)), sync,
    ...     T.BufferStore(A, S[7 - tx], (tx,)))), "threadIdx.x")
    >>> f = emulate_gpu(T.PrimFunc([A], body))
    >>> a = np.arange(8, dtype="float32")
    >>> T.interpret(f, a)
    >>> a.tolist()
    [14.0, 12.0, 10.0, 8.0, 6.0, 4.0, 2.0, 0.0]
"""

from __future__ import annotations

from .. import dtype as D
from .. import expr as expr_module
from ..buffer import Buffer
from ..errors import LoweringError
from ..expr import Broadcast, BufferLoad, FloorDiv, FloorMod, IntImm, Var
from ..function import PrimFunc
from ..interp.gpu import _collective, _warp_calls
from ..op import bitwise_xor
from ..ops.async_copy import asynchronous, copy_parts
from ..ops.gpu import COMBINERS, tiles_of, warp_combiner
from ..printer import to_text
from ..stmt import (Allocate, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt,
                    seq)
from ..thread_axes import thread_axis
from ..transform.gpu_sync import is_barrier
from ..visitor import Mutator, post_order_visit, substitute, used_vars
from .gpu_threads import (is_thread_loop, launch_dims, normalize_thread_bindings,
                          thread_vars)
from .inline import inline_launches


class _Block:
    """The threads of one kernel's block: variables, extents, the thread counter."""

    def __init__(self, kernel):
        dims = {t: e for t, e in launch_dims(kernel).items()
                if thread_axis(t).level == "thread"}
        self.vars = {t: v for t, v in thread_vars(kernel).items() if t in dims}
        self.axes = sorted(((thread_axis(t).dim, t) for t in dims))
        self.extent = {}
        for _, t in self.axes:
            e = dims[t]
            if not isinstance(e, IntImm):
                raise LoweringError(f"emulate_gpu: {t} has the symbolic extent {e}")
            self.extent[t] = e.value
        self.count = 1
        for n in self.extent.values():
            self.count *= n
        self.dtype = next(iter(self.vars.values())).dtype if self.vars else "int32"

    def index(self):
        """The thread's number from its indices (x fastest)."""
        total, stride = None, 1
        for _, t in self.axes:
            v = self.vars[t]
            term = v if stride == 1 else v * IntImm(stride, v.dtype)
            total = term if total is None else total + term
            stride *= self.extent[t]
        return total if total is not None else IntImm(0, self.dtype)

    def bind(self, body, counter):
        """``body`` with the thread indices bound from ``counter``."""
        stride = 1
        lets = []
        for _, t in self.axes:
            v, n = self.vars[t], self.extent[t]
            e = counter if stride == 1 else FloorDiv(counter, IntImm(stride, v.dtype))
            if stride * n < self.count:
                e = FloorMod(e, IntImm(n, v.dtype))
            lets.append((v, e))
            stride *= n
        used = {id(v) for v in used_vars(body)}
        for v, e in reversed(lets):
            if id(v) in used:
                body = LetStmt(v, e, body)
        return body

    def at_thread0(self, e):
        """``e`` (a loop bound or a condition, the same in every thread) as thread 0
        reads it."""
        return substitute(e, {v: IntImm(0, v.dtype) for v in self.vars.values()})


class _Strip(Mutator):
    """Thread loops dissolve (their variable is bound from the thread counter)."""

    def visit_For(self, loop):
        if is_thread_loop(loop) and thread_axis(loop.thread_tag).level == "thread":
            return self.visit(loop.body)
        return self.generic_visit(loop)


class _PerThread(Mutator):
    """Accesses of a buffer given one copy per thread get the thread's number first."""

    def __init__(self, old, new, index):
        self.old, self.new, self.index = old, new, index

    def _idx(self, indices):
        lanes = max((ix.lanes for ix in indices), default=1)
        first = self.index if lanes == 1 else Broadcast(self.index, lanes)
        return (first,) + tuple(indices)

    def visit_BufferLoad(self, e):
        e = self.generic_visit(e)
        if e.buffer is not self.old:
            return e
        return BufferLoad(self.new, self._idx(e.indices))

    def visit_BufferStore(self, s):
        s = self.generic_visit(s)
        if s.buffer is not self.old:
            return s
        return BufferStore(self.new, s.value, self._idx(s.indices))


class _Kernel:
    def __init__(self, kernel):
        self.blk = _Block(kernel)
        self.counter = 0

    def fresh(self, name):
        self.counter += 1
        return Var(f"{name}{self.counter}", self.blk.dtype)

    def per_thread(self, s):
        t = self.fresh("t")
        return For(t, IntImm(0, t.dtype), IntImm(self.blk.count, t.dtype), "serial",
                   self.blk.bind(_Strip().visit(s), t))

    def run(self, s):
        if isinstance(s, For) and is_thread_loop(s) and \
                thread_axis(s.thread_tag).level == "grid":
            # the blocks, one after the other (also when no statement is collective)
            return For(s.loop_var, s.min, s.extent, "serial", self.run(s.body))
        if not _collective(s):
            return self.per_thread(s)
        if is_barrier(s):
            return Evaluate(IntImm(0, "int32"))
        if isinstance(s, SeqStmt):
            return seq(*[self.run(c) for c in s.seq])
        if isinstance(s, For):
            if is_thread_loop(s):
                return self.run(s.body)
            return For(s.loop_var, self.blk.at_thread0(s.min),
                       self.blk.at_thread0(s.extent), "serial", self.run(s.body))
        if isinstance(s, IfThenElse):
            other = self.run(s.else_case) if s.else_case is not None else None
            return IfThenElse(self.blk.at_thread0(s.condition), self.run(s.then_case),
                              other)
        if isinstance(s, LetStmt):
            arr = Buffer((IntImm(self.blk.count, "int32"),), s.var.dtype, s.var.name)
            idx = self.blk.index()
            fill = self.per_thread(BufferStore(arr, s.value, (idx,)))
            body = substitute(s.body, {s.var: arr[idx]})
            return Allocate(arr, seq(fill, self.run(body)))
        if isinstance(s, Allocate):
            return self.alloc(s)
        if _warp_calls(s):
            return self.warp(s)
        if isinstance(s, Evaluate) and tiles_of(s.value):
            raise LoweringError(f"emulate_gpu: the tile op {to_text(s.value)} is not "
                                "emulated; run the kernel with T.interpret")
        raise LoweringError(f"emulate_gpu: cannot emulate a barrier inside "
                            f"{type(s).__name__}:\n{to_text(s)}")

    def alloc(self, s):
        buf = s.buffer
        if buf.scope == "shared":
            return Allocate(buf, self.run(s.body))
        # one copy per thread
        new = Buffer((IntImm(self.blk.count, "int32"),) + tuple(buf.shape), buf.dtype,
                     buf.name, scope="global", align=buf.align)
        body = _PerThread(buf, new, self.blk.index()).visit(s.body)
        return Allocate(new, self.run(body))

    def warp(self, s):
        calls = _warp_calls(s)
        if len(calls) != 1:
            raise LoweringError(f"emulate_gpu: one warp shuffle per statement, found "
                                f"{len(calls)}:\n{to_text(s)}")
        call = calls[0]
        value, width = call.args[0], call.args[1]
        if not isinstance(width, IntImm):
            raise LoweringError(f"emulate_gpu: the width of {to_text(call)} is not a "
                                "constant")
        n, dt, idx = self.blk.count, call.dtype, self.blk.index()
        a = Buffer((IntImm(n, "int32"),), dt, "lanes_a")
        b = Buffer((IntImm(n, "int32"),), dt, "lanes_b")
        steps = [self.per_thread(BufferStore(a, value, (idx,)))]
        node = COMBINERS_NODES[warp_combiner(call)]
        src, dst = a, b
        o = width.value // 2
        while o >= 1:
            i = self.fresh("lane")
            other = bitwise_xor(i, IntImm(o, i.dtype))
            steps.append(For(i, IntImm(0, i.dtype), IntImm(n, i.dtype), "serial",
                             BufferStore(dst, node(src[i], src[other]), (i,))))
            src, dst = dst, src
            o //= 2
        steps.append(self.per_thread(_Replace(call, src[idx]).visit(s)))
        return Allocate(a, Allocate(b, seq(*steps)))


def _node(name):
    return getattr(expr_module, name)


#: the IR node of each warp combiner
COMBINERS_NODES = {k: _node(k) for k in COMBINERS}


class _Replace(Mutator):
    def __init__(self, old, new):
        self.old, self.new = old, new

    def generic_visit(self, n):
        return self.new if n is self.old else Mutator.generic_visit(self, n)


class _Kernels(Mutator):
    def visit_For(self, loop):
        if is_thread_loop(loop):
            return _Kernel(loop).run(loop)
        return self.generic_visit(loop)


class _Global(Mutator):
    def __init__(self, bmap):
        self.bmap = bmap

    def visit_buffer(self, buf):
        return self.bmap.get(id(buf), buf)


def in_global_memory(body):
    """``body`` (a statement or a function's body) with every buffer of another scope
    replaced by a ``global`` one (for a CPU target, which has no other memory).

    Example::

        >>> import cuvil_tir as T
        >>> S = T.decl_buffer((4,), "float32", "S", scope="shared")
        >>> in_global_memory(T.BufferStore(S, T.float32(0), (T.const(0),))).buffer.scope
        'global'
    """
    found = {}

    def look(n):
        buf = getattr(n, "buffer", None)
        if isinstance(buf, Buffer) and buf.scope != "global":
            found.setdefault(id(buf), Buffer(buf.shape, buf.dtype, buf.name, buf.strides,
                                             "global", buf.align, buf.axis_separators))
    post_order_visit(body, look)
    return _Global(found).visit(body) if found else body


class _LandNow(Mutator):
    """Asynchronous copies as the stores they make, their groups as nothing: a kernel
    the interpreter checked race-free (each copy waited for before any use) computes
    the same when each copy lands at once."""

    def visit_Evaluate(self, s):
        role = asynchronous(s.value)
        if role in ("commit", "wait"):
            return Evaluate(IntImm(0, "int32"))
        if role != "copy":
            return s
        dst, src, nbytes = copy_parts(s.value)
        out = []
        for e in range(nbytes * 8 // max(8, D.bits(dst.buffer.dtype))):
            def at(load, e=e):
                return tuple(load.indices[:-1]) + (load.indices[-1] + e,)
            out.append(BufferStore(dst.buffer, BufferLoad(src.buffer, at(src)), at(dst)))
        return seq(*out)


def emulate_gpu(mod) -> PrimFunc:
    """The entry of the lowered GPU module ``mod`` (or a PrimFunc with kernels) as one
    CPU function with the same semantics (module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> emulate_gpu(f).body.value.value
        0
    """
    # one variable per axis in each kernel (a module read back from text has one per
    # loop)
    func = normalize_thread_bindings(inline_launches(mod))
    body = in_global_memory(_Kernels().visit(_LandNow().visit(func.body)))
    return func.with_body(body)


__all__ = ["emulate_gpu", "in_global_memory"]
