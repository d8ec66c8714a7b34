"""Scratchpad buffer lifetimes at instruction granularity, inside a loop nest too:
what the bank planner (:func:`~cuvil_tir.transform.bank_plan.place`) reads to decide
which buffers may share an address.

Every accelerator instruction gets a step, its index in program order.  A buffer's
lifetime is the steps from its first to its last instruction, widened to the whole of
every loop that holds some of its instructions but not all of them (it is live across
that loop's iterations).  Inside the innermost loop holding all of them it ends at its
last instruction when each iteration rewrites it whole before anything reads it: its
first instruction writes every byte of it, unconditionally, and it is not a
multi-buffered tile.  Otherwise it carries a value from one iteration to the next and
lives over the whole top-level statements it is used in (the coarse lifetime).

Statement order is not time order (each engine runs ahead of the others as far as its
queues allow), so two buffers placed at one address are one resource for the
synchronisation (:func:`~targets.accel.queues.aliases`): the engine reusing the address
waits for a token from the last engine that used it.

Example::

    >>> import cuvil_tir as T
    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> A = T.decl_buffer((16, 16), "int8", "A", scope="npu.inp")
    >>> G = T.decl_buffer((64, 16), "int8", "G")
    >>> i = T.var("i")
    >>> load = T.Evaluate(T.call_extern("int32", "toy_npu_dma_load", A[0:1, 0:16],
    ...                                 G[i * 16:i * 16 + 1, 0:16], 16, 16, 16, 16))
    >>> body = T.For(i, T.const(0), T.const(4), "serial", T.SeqStmt([load, load]))
    >>> lifetimes(body, toy_npu, {})[0]
    {'A': (0, 1)}
"""

from __future__ import annotations

from cuvil_tir.arith.affine import linear_form
from cuvil_tir.expr import BufferLoad, IntImm
from cuvil_tir.stmt import BufferRegion, Evaluate, For, IfThenElse, SeqStmt
from cuvil_tir.visitor import post_order_visit

from .tokens import accesses

# after the two regions: where rows, row bytes, the destination row stride and (3-D)
# the blocks and their stride sit in each load-side call's integer arguments
_LAYOUT = {"dma_load": (0, 1, 2, None, None), "dma_load_pad": (0, 1, 4, None, None),
           "dma_load_3d": (0, 1, 2, 4, 5), "dma_load_pad_3d": (0, 1, 4, 6, 7),
           "dma_fill": (0, 1, 2, None, None), "move": (0, 1, 2, None, None)}


def _calls(body, acc) -> tuple:
    """``([(loops, conditional, top step, call)], {id(loop): (first, last step)},
    {top step: (first, last step)})`` in program order."""
    calls, spans, tops = [], {}, {}
    while not isinstance(body, SeqStmt) and hasattr(body, "buffer") and \
            hasattr(body, "body"):
        body = body.body
    top_level = list(body.seq) if isinstance(body, SeqStmt) else [body]

    def walk(s, loops, cond, top):
        if isinstance(s, SeqStmt):
            for c in s.seq:
                walk(c, loops, cond, top)
        elif isinstance(s, For):
            first = len(calls)
            walk(s.body, loops + (s,), cond, top)
            spans[id(s)] = (first, len(calls) - 1)
        elif isinstance(s, IfThenElse):
            walk(s.then_case, loops, True, top)
            if s.else_case is not None:
                walk(s.else_case, loops, True, top)
        elif isinstance(s, Evaluate):
            v = s.value
            if getattr(v, "op", None) == "call_extern" and v.args[0].value in acc.engine_of:
                calls.append((loops, cond, top, v))
        elif hasattr(s, "body"):
            walk(s.body, loops, cond, top)

    for k, top in enumerate(top_level):
        first = len(calls)
        walk(top, (), False, k)
        tops[k] = (first, len(calls) - 1)
    return calls, spans, tops


def _tiles_cover(region, buf, loops) -> bool:
    """Whether ``region`` of ``buf``, over every iteration of ``loops``, covers all of
    ``buf``: along each dimension it starts at ``extent * v`` for a loop ``v`` from 0
    that walks the dimension's tiles (each loop walking one dimension), or at 0 with
    the whole dimension."""
    walks = {id(f.loop_var): f for f in loops}
    used = set()
    for r, n in zip(region.region, buf.shape):
        form = linear_form(r.min)
        if form is None or not isinstance(r.extent, IntImm) or form[1] != 0:
            return False
        e, terms = r.extent.value, {k: t for k, t in form[0].items() if t[1]}
        if not terms:
            if e != int(n.value):
                return False
            continue
        if len(terms) != 1:
            return False
        (k, (_, c)), = terms.items()
        f = walks.get(k)
        if f is None or k in used or c != e or not isinstance(f.min, IntImm) or \
                f.min.value != 0 or not isinstance(f.extent, IntImm) or \
                f.extent.value * e != int(n.value):
            return False
        used.add(k)
    return True


def _reads_output(it, name) -> bool:
    """Whether intrinsic ``it``'s desc reads operand ``name`` (an accumulation)."""
    found = []
    post_order_visit(it.desc.body, lambda n: found.append(n) if isinstance(n, BufferLoad)
                     and n.buffer.name == name else None)
    return bool(found)


def writes_whole(call, buf, acc, loops=()) -> bool:
    """Whether ``call`` writes every byte of ``buf``: a load, fill or move whose
    destination starts at ``buf``'s first byte with rows back to back; an intrinsic
    whose written operand, over every iteration of ``loops`` (the loops around it that
    only it uses ``buf`` in), tiles all of ``buf`` and that does not read it (not an
    accumulation).

    Example::

        >>> import cuvil_tir as T
        >>> from targets.accel.examples.toy_npu import toy_npu
        >>> A = T.decl_buffer((16, 16), "int32", "A", scope="npu.acc")
        >>> fill = T.call_extern("int32", "toy_npu_dma_fill", A[0:1, 0:16], 16, 64, 64)
        >>> writes_whole(fill, A, toy_npu), writes_whole(
        ...     T.call_extern("int32", "toy_npu_dma_fill", A[0:1, 0:16], 8, 64, 64), A, toy_npu)
        (True, False)
    """
    name = call.args[0].value
    regions = [a for a in call.args[2:] if isinstance(a, BufferRegion)]
    kind = "move" if name in acc.move_of else (
        "dma_" + acc.dma_calls[name][1] if name in acc.dma_calls else None)
    if kind not in _LAYOUT:
        it = acc.intrinsic_of_call(name) if name not in acc.dma_calls else None
        if it is None:
            return False
        out = [(p.name, r) for p, r in zip(it.desc.params, regions) if r.buffer is buf]
        return len(out) == 1 and out[0][0] in it.written() and \
            not _reads_output(it, out[0][0]) and _tiles_cover(out[0][1], buf, loops)
    if not regions or regions[0].buffer is not buf or loops:
        return False
    dst = regions[0]
    if any(not (isinstance(r.min, IntImm) and r.min.value == 0) for r in dst.region):
        return False
    ints = [a for a in call.args[2:] if not isinstance(a, BufferRegion)]
    if not all(isinstance(a, IntImm) for a in ints):
        return False
    at = _LAYOUT[kind]
    rows, row, stride = (ints[k].value for k in at[:3])
    span = rows * row
    if at[3] is not None:
        blocks, bstride = ints[at[3]].value, ints[at[4]].value
        if bstride != span and blocks > 1:
            return False
        span *= blocks
    return (stride == row or rows == 1) and span >= buf.nbytes_const()


def _inside(use, loop) -> bool:
    return any(f is loop for f in use[3])


def lifetimes(body, acc, versions) -> tuple:
    """``({buffer name: (first, last step)}, {buffer name: engines}, operand
    groups)`` (module doc); ``versions``: the multi-buffered tiles."""
    calls, spans, tops = _calls(body, acc)
    uses, groups = {}, []
    for step, (loops, cond, top, call) in enumerate(calls):
        e = acc.engine_of[call.args[0].value]
        found = accesses(call, acc, versions)
        for buf, w, _ in found:
            uses.setdefault(buf.name, []).append((step, e, w, loops, cond, top, call, buf))
        if e not in acc.dma_direction:
            groups.append({b.name for b, _, _ in found})
    life, engines = {}, {}
    for name, us in uses.items():
        engines[name] = {u[1] for u in us}
        common = us[0][3]
        for u in us[1:]:
            k = 0
            while k < min(len(common), len(u[3])) and common[k] is u[3][k]:
                k += 1
            common = common[:k]
        lo, hi = us[0][0], us[-1][0]
        for u in us:
            for loop in u[3][len(common):]:
                lo, hi = min(lo, spans[id(loop)][0]), max(hi, spans[id(loop)][1])
        first = us[0]
        inner = first[3][len(common):]      # the loops only its first instruction is in
        alone = not inner or all(u[0] == first[0] or not _inside(u, inner[0]) for u in us)
        if name in versions or first[4] or not first[2] or not alone or \
                not writes_whole(first[6], first[7], acc, inner):
            for u in us:    # it may carry a value: live over its whole statements
                lo, hi = min(lo, tops[u[5]][0]), max(hi, tops[u[5]][1])
        life[name] = (lo, hi)
    return life, engines, groups


__all__ = ["lifetimes", "writes_whole"]
