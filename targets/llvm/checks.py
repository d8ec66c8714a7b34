"""``AssertStmt`` in LLVM IR: compare, and on failure record and return a status.

A check costs one compare and a branch to a cold block; the failure block claims the
function's error slot with ``cmpxchg`` (the first failing thread wins), stores the
check's run-time values, frees the heap buffers this function allocated, and returns
``STATUS_CHECK_FAILED`` -- so the failing thread stops before the checked access.  In
an outlined parallel task the status ends the task; the thread pool then skips the
tasks not yet started and the launch returns the status (see
:mod:`targets.llvm.threadpool`).  The slot is an internal global read through an
exported getter ``<name>__cuvil_check_slot``; the static messages are comment lines of
the module (:mod:`targets.runtime.checks`).

Example::

    >>> import cuvil_tir as T
    >>> from targets.llvm.codegen import codegen_llvm
    >>> i = T.var("i")
    >>> f = T.PrimFunc([], T.For(i, T.const(0), T.const(4), "serial", T.assert_(i < 3, "i = {}", i)))
    >>> ir = codegen_llvm(f, "f")
    >>> "cmpxchg ptr @f.cvl_check" in ir and "define ptr @f__cuvil_check_slot()" in ir
    True
"""

from __future__ import annotations

import re

from ..runtime import checks as C
from . import intrinsics as I


def _global(name: str) -> str:
    return f"@{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name) else f'@"{name}"'


def _slot(name: str) -> str:
    return _global(f"{name}.cvl_check")


def emit_assert(cg, s) -> None:
    """Emit the check ``s`` (an ``AssertStmt``) into the code generator ``cg``."""
    b = cg.b
    sites = C.check_sites(cg.module)
    index, size = C.site_index(sites), C.slot_size(sites)
    slot = _slot(cg.root_name)
    ok_cond = cg.expr(s.condition)
    fail, record, out, ok = (b.label("check.fail"), b.label("check.record"),
                             b.label("check.out"), b.label("check.ok"))
    b.raw(f"br i1 {ok_cond}, label %{ok}, label %{fail}, !prof {_cold(b)}")
    b.start(fail)
    site = index.get(id(s), 0) + 1
    pair = b.op(f"cmpxchg ptr {slot}, i64 0, i64 {site} monotonic monotonic")
    won = b.op(f"extractvalue {{ i64, i1 }} {pair}, 1")
    b.raw(f"br i1 {won}, label %{record}, label %{out}")
    b.start(record)
    for k, v in enumerate(s.values):
        x = I.convert(b, cg.expr(v), v.dtype, "int64")
        p = b.op(f"getelementptr inbounds [{size} x i64], ptr {slot}, i64 0, i64 {k + 1}")
        b.raw(f"store i64 {x}, ptr {p}, align 8")
    b.raw(f"br label %{out}")
    b.start(out)
    for ptr in reversed(getattr(cg, "heap", ())):
        b.raw(f"call void @cuvil_workspace_free(ptr {ptr})")   # from s_Allocate
    b.raw(f"ret i32 {C.STATUS_CHECK_FAILED}")
    b.start(ok)


def _cold(b) -> str:
    """The module's branch weights saying the failure path is (almost) never taken."""
    return b.metadata_node("check weights", '!{!"branch_weights", i32 1048575, i32 1}')


def slot_definitions(func, name: str) -> list:  # func: a PrimFunc or a module
    """The error slot, its getter and the site comments, for a function with checks
    (nothing without).

    Example::

        >>> import cuvil_tir as T
        >>> slot_definitions(T.PrimFunc([], T.Evaluate(T.const(0))), "f")
        []
    """
    sites = C.check_sites(func)
    if not sites:
        return []
    slot = _slot(name)
    return C.site_comments(func, ";") + [
        f"{slot} = internal global [{C.slot_size(sites)} x i64] zeroinitializer, align 8",
        f"define ptr {_global(name + '__cuvil_check_slot')}() {{", f"  ret ptr {slot}", "}"]
