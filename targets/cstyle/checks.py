"""``AssertStmt`` in the C family: compare; on failure record, free, and stop.

The generated file gets a static error slot (``int64_t cvl_check_slot[N]``), an
exported getter ``<name>__cuvil_check_slot`` and one comment per check site (see
:mod:`targets.runtime.checks`).  A failed check claims the slot when it is free, stores its
run-time values, frees the heap buffers allocated since the function (or the current
parallel iteration) began, sets the status and leaves: ``return`` in serial code; in
an OpenMP ``parallel for`` iteration, a ``goto`` to the end of that iteration (an
OpenMP loop cannot be left early), so the failing thread stops before the checked
access while the other iterations, every access of which is checked too, finish.

Example::

    >>> import cuvil_tir as T
    >>> from targets.cstyle import CPrinter
    >>> i = T.var("i")
    >>> f = T.PrimFunc([], T.For(i, T.const(0), T.const(4), "serial", T.assert_(i < 3, "i = {}", i)))
    >>> src = CPrinter().print_function(f, "f")
    >>> "if (!(i < 3)) {" in src and "int64_t *f__cuvil_check_slot(void)" in src
    True
"""

from __future__ import annotations

from cuvil_tir.errors import CodegenError

from ..runtime import checks as C

SLOT = "cvl_check_slot"


def print_assert(p, s) -> None:
    """Print the check ``s`` with the printer ``p`` (a ``CPrinter``)."""
    if p.status_type == "void":
        raise CodegenError(f"{p.lang} codegen: run-time checks (T.assert_) need a function "
                           "that returns a status; this target's functions return void")
    site = p.check_index.get(id(s), 0) + 1
    p.emit(f"if (!({p.bare(s.condition)})) {{")
    p.indent += 1
    record = [f"if ({SLOT}[0] == 0) {{", f"    {SLOT}[0] = {site};"]
    record += [f"    {SLOT}[{k + 1}] = (int64_t){p.expr(v)};" for k, v in enumerate(s.values)]
    record.append("}")
    p.emit_check_record(record)
    for name in reversed(p.heap[p.heap_mark:]):
        p.emit(f"free({name});")
    p.emit_status(C.STATUS_CHECK_FAILED)
    if p.in_parallel and p.stop_label is not None:
        p.stop_used = True
        p.emit(f"goto {p.stop_label};")
    else:
        p.emit("return cvl_status;")
    p.indent -= 1
    p.emit("}")


def slot_lines(func, name: str) -> tuple[list, list]:
    """``(before, after)``: the slot declaration and site comments printed before the
    function, the getter after it (both empty without checks).

    Example::

        >>> import cuvil_tir as T
        >>> slot_lines(T.PrimFunc([], T.Evaluate(T.const(0))), "f")
        ([], [])
    """
    sites = C.check_sites(func)
    if not sites:
        return [], []
    before = [f"static int64_t {SLOT}[{C.slot_size(sites)}];"]
    before += C.site_comments(func, "/*", " */")
    after = [f"int64_t *{name}__cuvil_check_slot(void) {{", f"    return {SLOT};", "}", ""]
    return before, after
