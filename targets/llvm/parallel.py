"""Parallel tasks of a lowered module on the native thread pool.

Lowering outlines each ``parallel`` loop into a ``parallel_task`` function of the
module (:mod:`cuvil_tir.transform.outline`) and a launch in the host::

    T.evaluate(T.parallel_launch("f_par0", lo, n, A, B, x))

Here a task function ``f_par0(A, B, x, i)`` becomes two internal functions, and the
launch one call::

    define internal i32 @"f_par0.body"(ptr noalias %A, ..., i32 %i)   ; one iteration
    define internal i32 @"f_par0"(i32 %task, i32 %ntasks, ptr %closure) ; loads, calls body
    %err = call i32 @cuvil_parallel_launch(ptr @"f_par0", ptr %closure, i32 n)
    ; a non-zero %err (a task's status) is returned by the function at once

The closure is a stack struct holding ``lo`` and the launch's arguments (buffer
pointers and scalars).  Each task is one iteration; the pool runs contiguous blocks
of tasks per thread (:mod:`targets.llvm.threadpool`).  The body function takes its
buffers as ``noalias`` parameters, so when LLVM inlines it into the task it keeps
the aliasing facts the vectoriser needs.  A ``parallel`` loop nested inside a task
runs serially inside it (documented behaviour: nested parallelism is serialised).

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
from cuvil_tir.buffer import Buffer
from cuvil_tir.ir_module import launch_parts
from cuvil_tir.transform.inline import task_of
from cuvil_tir.transform.outline import LOOP_ANNOTATIONS

from . import intrinsics as I
from .builder import IRBuilder
from .codegen_expr import NONTEMPORAL
from .types import reg_type

LAUNCH_DECL = "declare i32 @cuvil_parallel_launch(ptr, ptr, i32)"


def _fields(task) -> list:
    """LLVM types of a task's closure: the first index, then its arguments."""
    *params, index = task.params
    return [reg_type(index.dtype)] + ["ptr" if isinstance(p, Buffer) else reg_type(p.dtype)
                                      for p in params]


def emit_launch(cg, call) -> None:
    """Emit ``T.parallel_launch(...)`` (a statement of a host function) as a launch
    on the thread pool; a non-zero status of a task is returned at once.

    Example::

        >>> emit_launch.__name__
        'emit_launch'
    """
    b = cg.b
    name, lo, extent, args = launch_parts(call)
    task = task_of(cg.module, name, args, cg.func.name)
    dt = task.params[-1].dtype
    values = [I.convert(b, cg.expr(lo), lo.dtype, dt)]
    values.extend(cg._buffer_ptr(a) if isinstance(a, Buffer) else cg.expr(a) for a in args)
    fields = _fields(task)
    struct = "{ " + ", ".join(fields) + " }"
    closure = b.entry_alloca(f"alloca {struct}, align 16")
    for n, (ty, val) in enumerate(zip(fields, values)):
        p = b.op(f"getelementptr inbounds {struct}, ptr {closure}, i32 0, i32 {n}")
        b.raw(f"store {ty} {val}, ptr {p}")
    ntasks = I.convert(b, cg.expr(extent), extent.dtype, "int32")
    b.declare("cuvil_parallel_launch", LAUNCH_DECL)
    err = b.op(f"call i32 @cuvil_parallel_launch(ptr @{_q(name)}, ptr {closure}, "
               f"i32 {ntasks})")
    failed = b.op(f"icmp ne i32 {err}, 0")
    fail, ok = b.label("par.fail"), b.label("par.ok")
    b.raw(f"br i1 {failed}, label %{fail}, label %{ok}")
    b.start(fail)
    b.raw(f"ret i32 {err}")
    b.start(ok)


def emit_task(cg, task) -> None:
    """Emit the ``parallel_task`` function ``task`` of ``cg``'s module: its body
    function and the pool's entry point that unpacks the closure.

    Example::

        >>> emit_task.__name__
        'emit_task'
    """
    # the body function: one iteration, buffers as noalias parameters
    sub = cg.child(task)
    sub.nontemporal = bool((task.attr(LOOP_ANNOTATIONS) or {}).get(NONTEMPORAL, False))
    params = []
    for n, p in enumerate(task.params):
        name = f"%p{n}"
        if isinstance(p, Buffer):
            params.append(f"ptr noalias align {D.itemsize(p.dtype)} {name}")
            sub.bufs[id(p)] = name
        else:
            params.append(f"{reg_type(p.dtype)} {name}")
            sub.vars[id(p)] = name
    sub.stmt(task.body)
    sub.b.raw("ret i32 0")
    body_name = f"{task.name}.body"
    cg.functions.append(_define(f"internal i32 @{_q(body_name)}", params, sub.b))

    # the task function: unpack the closure, i = lo + task id, call the body
    fields = _fields(task)
    struct = "{ " + ", ".join(fields) + " }"
    tb = cg.child(task).b
    loaded = []
    for n, ty in enumerate(fields):
        p = tb.op(f"getelementptr inbounds {struct}, ptr %closure, i32 0, i32 {n}")
        loaded.append(tb.op(f"load {ty}, ptr {p}"))
    dt = task.params[-1].dtype
    tid = I.convert(tb, "%task", "int32", dt)
    iv = tb.op(f"add {fields[0]} {loaded[0]}, {tid}")
    args = [f"{ty} {val}" for ty, val in zip(fields[1:], loaded[1:])] + [f"{fields[0]} {iv}"]
    status = tb.op(f"call i32 @{_q(body_name)}({', '.join(args)})")
    tb.raw(f"ret i32 {status}")
    cg.functions.append(_define(f"internal i32 @{_q(task.name)}",
                                ["i32 %task", "i32 %ntasks", "ptr %closure"], tb))


def _q(name: str) -> str:
    return f'"{name}"'


def _define(head: str, params: list, b: IRBuilder) -> str:
    lines = [f"define {head}({', '.join(params)}) #0 {{", "entry:"]
    lines.extend(b.entry_lines)
    lines.extend(b.lines)
    lines.append("}")
    return "\n".join(lines)
