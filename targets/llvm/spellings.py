"""How the llvm backend writes each op: its entries in the op registry's spelling table.

A ``str`` spelling is an LLVM intrinsic (``"exp"``: ``llvm.exp.<type>``); a callable
``spelling(emitter, call)`` returns the call's SSA value, built by the
:class:`~targets.llvm.codegen_expr.ExprEmitter` ``emitter``.  An op the table does not
name is a call of its C math library function (``libm``, scalarized) when it has one,
else it is written through its expansion (``sigmoid``, ``q_multiply_shift``); see
:mod:`cuvil_tir.ops.spelling`.

Example::

    >>> from cuvil_tir import ops
    >>> ops.spelling("llvm", "round"), callable(ops.spelling("llvm", "tanh"))
    ('roundeven', True)
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir import ops

from . import intrinsics as I
from .types import reg_type
from .vector_math import vector_math

# ops with an LLVM intrinsic of their own: llvm.<name>.<type>
_INTRINSICS = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2",
               "log10": "log10", "sqrt": "sqrt", "floor": "floor", "ceil": "ceil",
               "round": "roundeven", "trunc": "trunc", "sin": "sin", "cos": "cos",
               "pow": "pow", "fma": "fma"}


def _args(cg, e) -> list:
    return [cg.expr(a) for a in e.args]


def _libm(op):
    if op.libm is None:
        return None
    return lambda cg, e: I.libm_call(cg.b, op.libm, _args(cg, e), e.dtype)


def _vector_math(name, scalar):
    """``name`` of a float32 (float16, bfloat16) vector in vector registers
    (:mod:`targets.llvm.vector_math`; ``afn``: the looser grade); any other dtype
    as ``scalar(cg, e)`` writes it."""
    def spell(cg, e):
        if e.lanes > 1 and D.element(e.dtype) in ("float32", "float16", "bfloat16"):
            x = I.widen(cg.b, cg.expr(e.args[0]), e.dtype)
            r = vector_math(cg.b, name, x, e.lanes, fast="afn" in cg.fm or "fast" in cg.fm)
            return I.narrow(cg.b, r, e.dtype)
        return scalar(cg, e)
    return spell


def _intrinsic(name):
    return lambda cg, e: I.math_call(cg.b, name, _args(cg, e), e.dtype)


def _expanded(cg, e):
    return cg.expr(ops.get_op(e.op).expand(*e.args))     # sigmoid: 1 / (1 + exp(-x))


def _abs(cg, e):
    # llvm.abs on integers (INT_MIN stays INT_MIN), llvm.fabs on floats
    return I.math_call(cg.b, "abs" if D.is_integer(e.dtype) else "fabs", _args(cg, e),
                       e.dtype)


def _access_ptr(cg, e):
    # the address of the buffer's flat element `offset`
    buf, off = e.args[0].buffer, e.args[1]
    return cg._gep(buf, cg._buffer_ptr(buf), cg.expr(off), off.dtype)


def _binary(inst):
    return lambda cg, e: cg.b.op(f"{inst} {reg_type(e.dtype)} "
                                 f"{', '.join(_args(cg, e))}")


def _shift(left):
    return lambda cg, e: I.shift(cg.b, left, *_args(cg, e), e.dtype, e.args[1])


def _default(op):
    if op.collective is not None:       # a GPU op (cuvil_tir.ops.gpu)
        return ops.Unsupported(
            f"{op.name} runs across the threads of a GPU {op.collective} together; the "
            "llvm target runs on the CPU: build for a GPU target such as 'cuda'")
    if op.asynchronous is not None:     # cuvil_tir.ops.async_copy
        return ops.Unsupported(
            f"{op.name} is an asynchronous copy into a GPU's on-chip memory; the llvm "
            "target runs on the CPU: build for a GPU target such as 'cuda'")
    return _libm(op)


ops.register_backend("llvm", default=_default)
ops.register_spellings("llvm", {
    **_INTRINSICS,
    "exp": _vector_math("exp", _intrinsic("exp")),
    "log": _vector_math("log", _intrinsic("log")),
    "tanh": _vector_math("tanh", _libm(ops.get_op("tanh"))),
    "sigmoid": _vector_math("sigmoid", _expanded),
    "abs": _abs,
    "if_then_else": lambda cg, e: cg._if_then_else(*e.args, dt=e.dtype),
    "call_extern": lambda cg, e: cg._call_extern(e),
    "assume": lambda cg, e: "true",      # a hint with no run-time effect
    "access_ptr": _access_ptr,
    "dsmem_load": ops.Unsupported(
        "dsmem_load reads the shared memory of another block of a GPU thread-block "
        "cluster; the llvm target runs on the CPU: build for Target('cuda', arch='sm_90')"),
    "bitwise_and": _binary("and"),
    "bitwise_or": _binary("or"),
    "bitwise_xor": _binary("xor"),
    "bitwise_not": lambda cg, e: I.bitwise_not(cg.b, cg.expr(e.args[0]), e.dtype),
    "shift_left": _shift(True),
    "shift_right": _shift(False),
    "parallel_launch": ops.Unsupported(
        "T.parallel_launch is a statement of the host function "
        "(T.evaluate(T.parallel_launch(...))), not a value inside an expression"),
    "device_launch": ops.Unsupported(
        "T.device_launch (a kernel launch) is a statement of a GPU target's host "
        "program; the llvm target launches no kernels"),
})

__all__: list = []
