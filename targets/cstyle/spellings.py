"""How the C family writes each op: the ``"c"`` entries of the op registry's spelling
table (CUDA C and accelerator C inherit them; see :mod:`cuvil_tir.ops.spelling`).

A ``str`` spelling is a C template over the printed arguments ``{0}``, ``{1}`` … and
``{f}`` (``"f"`` for float32 arithmetic, ``""`` for float64); float16 and bfloat16
values are computed in float and rounded back by the printer.  A callable
``spelling(printer, call)`` returns the C text itself.  An op the table does not name
is a call of its C math library function (``libm``) when it has one, else it is
written through its expansion (``sigmoid``, ``q_multiply_shift``).

Example::

    >>> from cuvil_tir import ops
    >>> ops.spelling("c", "if_then_else"), ops.spelling("c", "tanh")
    ('({0} ? {1} : {2})', 'tanh{f}({0})')
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir import ops

from .helpers import helper


def _libm(op):
    if op.libm is None or op.arity < 0:
        return None
    return f"{op.libm}{{f}}({', '.join(f'{{{k}}}' for k in range(op.arity))})"


def _args(p, e) -> list:
    return [p.bare(a) for a in e.args]


def _abs(p, e):
    dt = D.element(e.dtype)
    (x,) = _args(p, e)
    if D.is_uint(dt):
        return f"({x})"
    if D.is_integer(dt):       # INT_MIN stays INT_MIN, without signed overflow
        return p.call_helper(helper("abs", dt, p.scalar_type(dt)), x)
    return p.round_value(f"fabs{'' if dt == 'float64' else 'f'}({x})", dt)


def _logic(sym):
    def spell(p, e):
        ctype = p.scalar_type(D.element(e.dtype))
        a, b = _args(p, e)
        return f"(({ctype})(({a}) {sym} ({b})))"
    return spell


def _shift(p, e):
    dt = D.element(e.dtype)
    return p.call_helper(helper(e.op, dt, p.scalar_type(dt)), *_args(p, e))


def _default(op):
    if op.collective is not None:       # a GPU op (cuvil_tir.ops.gpu): a GPU C dialect's
        return ops.Unsupported(
            f"{op.name} runs across the threads of a GPU {op.collective} together; plain "
            "C has no threads to run it with: build for a GPU target such as 'cuda'")
    if op.asynchronous is not None:     # cuvil_tir.ops.async_copy
        return ops.Unsupported(
            f"{op.name} is an asynchronous copy into a GPU's on-chip memory; plain C "
            "copies synchronously: build for a GPU target such as 'cuda'")
    if op.lanes_reference is not None:   # a CPU's dot-product instruction (ops.dot)
        return ops.Unsupported(
            f"{op.name} adds products of several lanes of its arguments into each "
            "result lane, which the C family's lane-by-lane code does not write: build "
            "for the 'llvm' target with a CPU that has the instruction (mcpu=...)")
    return _libm(op)


ops.register_backend("c", default=_default)
ops.register_spellings("c", {
    "if_then_else": "({0} ? {1} : {2})",
    "assume": "1",                                  # a hint with no run-time effect
    "abs": _abs,
    "call_extern": lambda p, e: p.print_extern(e),
    "bitwise_and": _logic("&"),
    "bitwise_or": _logic("|"),
    "bitwise_xor": _logic("^"),
    "bitwise_not": lambda p, e: f"(({p.scalar_type(D.element(e.dtype))})~({_args(p, e)[0]}))",
    "shift_left": _shift,
    "shift_right": _shift,
    "dsmem_load": ops.Unsupported(
        "dsmem_load reads the shared memory of another block of a GPU thread-block "
        "cluster; plain C has no blocks: build for Target('cuda', arch='sm_90')"),
    "access_ptr": ops.Unsupported(
        "T.tvm_access_ptr (a pointer to a flat range of a buffer) has no C spelling; "
        "hand T.call_extern the buffer region instead (A[i:i + 16]), which is printed "
        "as the address of its first element"),
    "device_launch": ops.Unsupported(
        "T.device_launch (a kernel launch) is a statement of a GPU target's host "
        "program, which its own codegen prints; plain C launches no kernels"),
    "parallel_launch": ops.Unsupported(
        "T.parallel_launch (an outlined parallel task) has no C spelling: the C target "
        "runs parallel loops in place (OpenMP), without outlining them"),
})

__all__: list = []
