"""Compile expressions into closures over the interpreter's frame.

:class:`Frame` holds the run-time state: ``env`` (one slot per variable) and ``bufs``
(one numpy array per buffer).  :class:`ExprCompiler` turns each expression into a
zero-argument Python closure once, so running a loop nest never dispatches on node
types again.  Vector expressions evaluate to tuples of lanes.

Example::

    >>> import cuvil_tir as T
    >>> c = ExprCompiler(Frame())
    >>> i = T.var("i")
    >>> with c.binding(i) as slot:
    ...     f = c.expr((i * 3) // 2)
    ...     c.frame.env[slot] = 5
    ...     f()
    7
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from .. import dtype as D
from .. import ops
from ..errors import LoweringError
from ..expr import BinaryOp, BufferLoad, Var
from ..printer import to_text
from . import scalar as S
from .memory import compile_load, compile_masked_load
from .tile_ops import serial_tile_rule


class Frame:
    """Run-time state: variable slots and buffer arrays.

    Example::

        >>> Frame().env
        []
    """

    def __init__(self):
        self.env: list = []
        self.bufs: list = []


def _lanewise(fn, n: int, *lanes_of):
    """Lift a scalar function to vectors: arguments with lanes 1 are broadcast."""
    getters = []
    for f, ln in lanes_of:
        getters.append((f, ln == 1))

    def run():
        vals = [(f(),) * n if scalar else f() for f, scalar in getters]
        return tuple(fn(*args) for args in zip(*vals))
    return run


class ExprCompiler:
    """Expression -> closure, with variable scoping checked at compile time.

    Example::

        >>> import cuvil_tir as T
        >>> ExprCompiler(Frame()).expr(T.const(7, "int8") * 20)()
        -116
    """

    def __init__(self, frame: Frame):
        self.frame = frame
        self.var_slot: dict[int, int] = {}
        self.live: dict[int, int] = {}       # var id -> number of enclosing bindings
        self.buf_slot: dict[int, int] = {}
        self.buf_live: dict[int, int] = {}

    # scopes ------------------------------------------------------------------------
    @contextmanager
    def binding(self, var: Var):
        """Make ``var`` defined while compiling the body; yields its env slot."""
        slot = self.var_slot.get(id(var))
        if slot is None:
            slot = len(self.frame.env)
            self.var_slot[id(var)] = slot
            self.frame.env.append(None)
        self.live[id(var)] = self.live.get(id(var), 0) + 1
        try:
            yield slot
        finally:
            self.live[id(var)] -= 1

    @contextmanager
    def buffer_binding(self, buf):
        """Make ``buf`` defined while compiling the body; yields its array slot."""
        slot = self.buf_slot.get(id(buf))
        if slot is None:
            slot = len(self.frame.bufs)
            self.buf_slot[id(buf)] = slot
            self.frame.bufs.append(None)
        self.buf_live[id(buf)] = self.buf_live.get(id(buf), 0) + 1
        try:
            yield slot
        finally:
            self.buf_live[id(buf)] -= 1

    def buffer(self, buf, where) -> int:
        """The slot of a buffer in scope, or a LoweringError naming ``where``."""
        if not self.buf_live.get(id(buf)):
            raise LoweringError(f"buffer {buf.name} is used in `{to_text(where)}` but is "
                                "neither a parameter nor allocated by an enclosing block, "
                                "Allocate or alloc_buffers")
        return self.buf_slot[id(buf)]

    # expressions ---------------------------------------------------------------------
    def expr(self, e):
        """The closure evaluating ``e``."""
        method = getattr(self, "_" + type(e).__name__, None)
        if method is None:
            if isinstance(e, BinaryOp):
                return self._binary(e)
            raise LoweringError(f"the interpreter cannot evaluate {type(e).__name__} "
                                f"nodes (`{to_text(e)}`); lower it first")
        return method(e)

    def _Var(self, v):
        if not self.live.get(id(v)):
            raise LoweringError(f"variable {v.name} is used but not defined (no enclosing "
                                "loop, let, block iter var or parameter binds it)")
        env, k = self.frame.env, self.var_slot[id(v)]
        return lambda: env[k]

    _SizeVar = _Var

    def _IntImm(self, c):
        v = bool(c.value) if D.is_bool(c.dtype) else c.value
        return lambda: v

    def _FloatImm(self, c):
        v = S.to_dtype(c.dtype)(c.value)
        return lambda: v

    def _StringImm(self, c):
        v = c.value
        return lambda: v

    def _binary(self, e):
        fn = S.binary_op(type(e).__name__, e.a.dtype)
        fa, fb = self.expr(e.a), self.expr(e.b)
        n = D.lanes(e.a.dtype)
        if n > 1:
            return _lanewise(fn, n, (fa, n), (fb, n))
        return lambda: fn(fa(), fb())

    def _Not(self, e):
        fa = self.expr(e.a)
        if e.a.lanes > 1:
            return _lanewise(lambda x: not x, e.a.lanes, (fa, e.a.lanes))
        return lambda: not fa()

    def _Cast(self, e):
        fn = S.cast_op(e.value.dtype, e.dtype)
        fv = self.expr(e.value)
        if e.lanes > 1:
            return _lanewise(fn, e.lanes, (fv, e.lanes))
        return lambda: fn(fv())

    def _Select(self, e):
        fc, ft, ff = (self.expr(x) for x in (e.condition, e.true_value, e.false_value))
        n = e.lanes
        if n > 1:
            return _lanewise(lambda c, t, f: t if c else f, n, (fc, e.condition.lanes),
                             (ft, e.true_value.lanes), (ff, e.false_value.lanes))

        def select():
            # both branches are evaluated, as Select allows (unlike if_then_else)
            c, t, f = fc(), ft(), ff()
            return t if c else f
        return select

    def _Ramp(self, e):
        fb, fs = self.expr(e.base), self.expr(e.stride)
        add, mul = S.binary_op("Add", e.base.dtype), S.binary_op("Mul", e.base.dtype)
        n = e.lanes
        to = S.to_dtype(e.base.dtype)
        ks = [to(k) for k in range(n)]
        return lambda: (lambda b, s: tuple(add(b, mul(s, k)) for k in ks))(fb(), fs())

    def _Broadcast(self, e):
        fv, n = self.expr(e.value), e.lanes
        return lambda: (fv(),) * n

    def _Let(self, e):
        fv = self.expr(e.value)
        with self.binding(e.var) as k:
            fb = self.expr(e.body)
        env = self.frame.env

        def let():
            env[k] = fv()
            return fb()
        return let

    def _Call(self, e):
        rule = ops.spelling("interp", e.op) if ops.has_op(e.op) else None
        if rule is ops.EXPAND:
            return self.expr(ops.get_op(e.op).expand(*e.args))   # e.g. q_multiply_shift
        if rule is not None:
            return rule(self, e)
        return self._reference(e)

    def _reference(self, e):
        """An op computed by its reference semantics, lane by lane."""
        fn = S.intrinsic_op(e.op, e.dtype)
        args = [self.expr(a) for a in e.args]
        n = e.lanes
        if n > 1:
            return _lanewise(fn, n, *[(f, a.lanes) for f, a in zip(args, e.args)])
        if len(args) == 1:
            (fa,) = args
            return lambda: fn(fa())
        return lambda: fn(*[f() for f in args])

    def _lanes_reference(self, e):
        """An op whose result lanes combine several argument lanes, computed on whole
        vectors by its ``lanes_reference`` (the op registry)."""
        fn = ops.get_op(e.op).lanes_reference
        args = [self.expr(a) for a in e.args]
        conv = S.to_dtype(e.dtype)

        def run():
            out = [conv(x) for x in np.asarray(fn(*[np.asarray(f()) for f in args])).tolist()]
            return tuple(out) if e.lanes > 1 else out[0]
        return run

    def _call_extern(self, e):
        raise LoweringError(f"interpreter: T.call_extern of '{e.args[0].value}' calls "
                            "a function of the target, which the interpreter does not "
                            "have; interpret the function before it is replaced by the "
                            "call, or build it for the target")

    def _if_then_else(self, e):
        if len(e.args) != 3:
            raise LoweringError(f"if_then_else takes 3 arguments, found {len(e.args)}")
        fc, ft, ff = (self.expr(a) for a in e.args)
        if e.lanes > 1 and e.args[0].lanes > 1:
            return self._vector_if_then_else(e, fc, ft, ff)
        return lambda: ft() if fc() else ff()

    def _vector_if_then_else(self, e, fc, ft, ff):
        # per-lane laziness: a vector load branch reads only the lanes that take it;
        # any other branch is evaluated only if some lane takes it
        n = e.lanes

        def branch(arg, f, negate):
            if isinstance(arg, BufferLoad) and arg.lanes > 1:
                masked = compile_masked_load(self, arg)
                if negate:
                    return lambda c: masked(tuple(not m for m in c))
                return masked
            scalar = arg.lanes == 1
            skip = all if negate else (lambda c: not any(c))

            def whole(c):
                if skip(c):
                    return (None,) * n
                return (f(),) * n if scalar else f()
            return whole

        bt = branch(e.args[1], ft, False)
        bf = branch(e.args[2], ff, True)

        def vec():
            c = fc()
            return tuple(a if m else b for m, a, b in zip(c, bt(c), bf(c)))
        return vec

    def _BufferLoad(self, e):
        return compile_load(self, e)


def as_index(x):
    """An index value as a Python int (rejects vectors in scalar positions)."""
    if isinstance(x, tuple):
        raise LoweringError("a vector value was used where a scalar index is needed")
    return int(x)


def _reference_rule(op):
    # a GPU op outside a kernel: a block barrier orders nothing in one thread; any other
    # collective needs the threads the GPU semantics (cuvil_tir.interp.gpu) run
    if op.collective == "block":
        return lambda self, e: lambda: 0
    if op.collective == "warp" and op.tiles is not None:
        # a tile op in a serial run (a scheduled function's meaning): computed once
        return serial_tile_rule
    if op.collective is not None:
        return ops.Unsupported(
            f"{op.name} runs across the lanes of a {op.collective} together; the "
            "interpreter runs it only inside a kernel (under a loop bound to a thread "
            "axis), where every lane takes part", LoweringError)
    if op.asynchronous is not None:
        return ops.Unsupported(
            f"{op.name} is an asynchronous copy: the interpreter runs it as a statement "
            "of a kernel (cuvil_tir.interp.async_copy), under a loop bound to a thread "
            "axis", LoweringError)
    if op.lanes_reference is not None:
        return ExprCompiler._lanes_reference
    # an op with reference semantics is computed by them: the interpreter's default
    if op.reference is not None or op.int_reference is not None:
        return ExprCompiler._reference
    return None


# how the interpreter runs each op (the reference for every target): its rules in the
# op registry's spelling table
ops.register_backend("interp", default=_reference_rule, label="interpreter")
ops.register_spellings("interp", {
    "if_then_else": ExprCompiler._if_then_else,
    "call_extern": ExprCompiler._call_extern,
    # a hint: nothing is checked or computed
    "assume": lambda self, e: lambda: True,
    # a pointer: evaluating it (T.evaluate(A.access_ptr("r"))) does nothing; only a
    # T.call_extern, which the interpreter refuses, could use it
    "access_ptr": lambda self, e: lambda: None,
    "parallel_launch": ops.Unsupported(
        "T.parallel_launch runs a task of its module: interpret the IRModule (which runs "
        "each launch as the loop it came from), not its host function alone",
        LoweringError),
    "device_launch": ops.Unsupported(
        "T.device_launch runs a kernel of its module: interpret the IRModule (which runs "
        "each launch as the kernel's thread loops), not its host function alone",
        LoweringError),
})
