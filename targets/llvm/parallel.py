"""Outlining ``parallel`` loops into tasks of the native thread pool.

A ``parallel`` loop ``for i in range(lo, lo + n): body`` becomes two internal
functions and one call::

    define internal i32 @f.par0.body(ptr noalias %A, ..., i32 %i)    ; one iteration
    define internal i32 @f.par0(i32 %task, i32 %ntasks, ptr %closure) ; loads, calls body
    %err = call i32 @cuvil_parallel_launch(ptr @f.par0, ptr %closure, i32 n)
    ; a non-zero %err (a task's status) is returned by the function at once

The closure is a stack struct holding every value the body uses that is defined
outside it (buffer pointers, scalars, outer loop variables, symbolic sizes) and
``lo``.  Each task is one iteration; the pool runs contiguous blocks of tasks per
thread (:mod:`targets.llvm.threadpool`).  The body function takes its buffers as
``noalias`` parameters, so when LLVM inlines it into the task it keeps the aliasing
facts the vectoriser needs.  A ``parallel`` loop nested inside another runs serially
inside the outer task (documented behaviour: nested parallelism is serialised).

Example::

    >>> import cuvil_tir as T
    >>> from targets.llvm.codegen import codegen_llvm
    >>> A = T.decl_buffer((64,), "float32", "A")
    >>> i = T.var("i")
    >>> f = T.PrimFunc([A], T.For(i, T.const(0), T.const(64), "parallel",
    ...                 T.BufferStore(A, T.const(1.0), (i,))))
    >>> "call i32 @cuvil_parallel_launch" in codegen_llvm(f)
    True
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.visitor import Visitor, used_vars

from . import intrinsics as I
from .builder import IRBuilder
from .types import reg_type

LAUNCH_DECL = "declare i32 @cuvil_parallel_launch(ptr, ptr, i32)"


def _captures(cg, loop) -> tuple[list, list]:
    """Variables and buffers used by ``loop``'s body that are defined outside it."""
    bufs: dict[int, object] = {}

    class _Bufs(Visitor):
        def visit_buffer(self, buf):
            bufs.setdefault(id(buf), buf)

    _Bufs().visit(loop.body)
    vs = [v for v in used_vars(loop.body) if id(v) in cg.vars and v is not loop.loop_var]
    return vs, [bf for k, bf in bufs.items() if k in cg.bufs]


def emit_parallel_for(cg, loop) -> None:
    """Emit ``loop`` (kind parallel) as a launch on the thread pool.

    Example::

        >>> emit_parallel_for.__name__
        'emit_parallel_for'
    """
    b = cg.b
    k = len(cg.functions) // 2
    task_name = f"{cg.name}.par{k}"
    body_name = f"{task_name}.body"
    dt = loop.loop_var.dtype
    t = reg_type(dt)
    lo = I.convert(b, cg.expr(loop.min), loop.min.dtype, dt)
    ext = I.convert(b, cg.expr(loop.extent), loop.extent.dtype, dt)
    vs, bufs = _captures(cg, loop)

    # the closure: lo, then the captured values, then the buffer pointers
    fields = [t] + [reg_type(v.dtype) for v in vs] + ["ptr"] * len(bufs)
    values = [lo] + [cg.vars[id(v)] for v in vs] + [cg.bufs[id(bf)] for bf in bufs]
    struct = "{ " + ", ".join(fields) + " }"
    closure = b.entry_alloca(f"alloca {struct}, align 16")
    for n, (ty, val) in enumerate(zip(fields, values)):
        p = b.op(f"getelementptr inbounds {struct}, ptr {closure}, i32 0, i32 {n}")
        b.raw(f"store {ty} {val}, ptr {p}")
    ntasks = I.convert(b, ext, dt, "int32")
    b.declare("cuvil_parallel_launch", LAUNCH_DECL)
    err = b.op(f"call i32 @cuvil_parallel_launch(ptr @{_q(task_name)}, ptr {closure}, "
               f"i32 {ntasks})")
    failed = b.op(f"icmp ne i32 {err}, 0")
    fail, ok = b.label("par.fail"), b.label("par.ok")
    b.raw(f"br i1 {failed}, label %{fail}, label %{ok}")
    b.start(fail)
    b.raw(f"ret i32 {err}")
    b.start(ok)

    # the body function: one iteration, buffers as noalias parameters
    sub = cg.child()
    params = []
    for n, v in enumerate(vs):
        name = f"%v{n}"
        params.append(f"{reg_type(v.dtype)} {name}")
        sub.vars[id(v)] = name
    for n, bf in enumerate(bufs):
        name = f"%b{n}"
        params.append(f"ptr noalias align {D.itemsize(bf.dtype)} {name}")
        sub.bufs[id(bf)] = name
    params.append(f"{t} %iv")
    sub.vars[id(loop.loop_var)] = "%iv"
    sub.stmt(loop.body)
    sub.b.raw("ret i32 0")
    cg.functions.append(_define(f"internal i32 @{_q(body_name)}", params, sub.b))

    # the task function: unpack the closure, i = lo + task id, call the body
    tb = cg.child().b
    loaded = []
    for n, ty in enumerate(fields):
        p = tb.op(f"getelementptr inbounds {struct}, ptr %closure, i32 0, i32 {n}")
        loaded.append(tb.op(f"load {ty}, ptr {p}"))
    tid = I.convert(tb, "%task", "int32", dt)
    iv = tb.op(f"add {t} {loaded[0]}, {tid}")
    args = [f"{ty} {val}" for ty, val in zip(fields[1:], loaded[1:])] + [f"{t} {iv}"]
    status = tb.op(f"call i32 @{_q(body_name)}({', '.join(args)})")
    tb.raw(f"ret i32 {status}")
    cg.functions.append(_define(f"internal i32 @{_q(task_name)}",
                                ["i32 %task", "i32 %ntasks", "ptr %closure"], tb))


def _q(name: str) -> str:
    return f'"{name}"'


def _define(head: str, params: list, b: IRBuilder) -> str:
    lines = [f"define {head}({', '.join(params)}) #0 {{", "entry:"]
    lines.extend(b.entry_lines)
    lines.extend(b.lines)
    lines.append("}")
    return "\n".join(lines)
