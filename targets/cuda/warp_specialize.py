"""Warp specialization from a schedule: a producer warpgroup issuing the tensor copies
of a pipelined loop, consumer warpgroups computing, "full" and "empty" mbarriers
between them (Hopper, sm_90+; the shape of CUTLASS's and ThunderKittens' kernels).

A loop annotated ``software_pipeline_stage`` whose copies are tensor copies (a ring
of shared stages, :mod:`targets.cuda.tma_ring`) may also be annotated
``"cuda.warp_specialize"``::

    sch.annotate(ko, "software_pipeline_stage", [0, 0, 2])   # 3 stages in the ring
    sch.annotate(ko, "cuda.warp_specialize", 1)

The block's threads must be warpgroups: ``threadIdx.x`` of extent 128 and
``threadIdx.y`` counting ``G`` of them (absent: one).  :func:`warp_specialized`
(called by ``lower_tma_copies``, before the pipeline would be injected) launches one
more warpgroup, ``threadIdx.y == G``, and replaces the loop by a branch on it:

* the producer (the new warpgroup's first thread) runs the loop's iterations issuing
  only the copies: for iteration ``k``, stage ``s = (k - lo) % V`` of each ring, it
  waits until the consumers released the stage (``EMPTY[s]``, the phase of parity
  ``((k - lo) // V + 1) % 2``: a fresh barrier's "previous" phase, so the first ``V``
  waits pass), announces the box's bytes on ``FULL[s]`` and issues the ``tma_load``;
* the consumers run the loop's other statements: each iteration waits on ``FULL[s]``
  (parity ``(k - lo) // V % 2``) before them and arrives on ``EMPTY[s]`` after them
  (``EMPTY`` expects one arrival per consumer thread).  When those statements are one
  synchronous ``wgmma`` (``cuda.wgmma_sync`` in its thread loops), the consumers keep
  one group of steps in flight instead: ``wgmma_async``, ``wgmma_commit``,
  ``wgmma_wait(1)``, then the release of the *previous* stage (whose steps that wait
  found done), and ``wgmma_wait(0)`` after the loop (:mod:`targets.cuda.wgmma_async`).

The annotation's value is 1, or the registers of a producer and of a consumer thread
(``[40, 232]``): each warpgroup then starts its side with ``setmaxnreg`` to that count
(:mod:`targets.cuda.setmaxnreg`, the producer giving registers back, the consumers
taking them) and returns to the block's starting count after it.

No block barrier lies between the two sides (``bar.sync`` would need the producer's
threads too); the mbarriers order them.  The tiles get ``V`` versions (``V``: the
stages the pipeline gives them), the statements outside the loop run on the
consumers only (the thread-binding normalisation guards them with ``threadIdx.y <
G``).  The GPU interpreter runs the two sides as interleaved tasks
(:mod:`cuvil_tir.interp.gpu_tasks`): a read before its ``FULL`` wait is a race, a
missing arrival a reported deadlock.  What it cannot split is refused with a
``LoweringError``: a loop without tensor copies or without ``software_pipeline_stage``,
threads that are not warpgroups.

Example::

    >>> WS_KEY
    'cuda.warp_specialize'
"""

from __future__ import annotations

import cuvil_tir as T
from cuvil_tir.analysis.regions import simplify
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CuvilError, LoweringError
from cuvil_tir.expr import IntImm
from cuvil_tir.op import floormod
from cuvil_tir.printer import to_text
from cuvil_tir.stmt import Allocate, Evaluate, For, IfThenElse, seq
from cuvil_tir.transform.pipeline_async import ASYNC
from cuvil_tir.transform.software_pipeline import ORDER, STAGE, stage_versions, versioned
from cuvil_tir.visitor import substitute

from .setmaxnreg import SETMAXNREG_OP, register_split
from .tma_ring import loop_statements, ring_parity, ring_slot
from .wgmma import WGMMA_OP
from .wgmma_async import COMMIT_OP, WAIT_OP, WGMMA_ASYNC_OP

#: the loop annotation asking for a producer warpgroup and consumer warpgroups
WS_KEY = "cuda.warp_specialize"
#: threads of a warpgroup
WARPGROUP = 128


def _fail(loop, why: str, fix: str):
    raise LoweringError(f"the loop {loop.loop_var.name} annotated {WS_KEY!r}: {why}:\n"
                        f"{to_text(loop)}\n{fix}")


def _call(op: str, *args) -> Evaluate:
    return Evaluate(T.Call("int32", op, tuple(
        a if not isinstance(a, int) else T.const(a) for a in args)))


def consumer_groups(loop, extents: dict) -> int:
    """The consumer warpgroups of a block with the threadIdx ``extents`` (the largest
    extent of each axis), checked to be warpgroups.

    Example::

        >>> import cuvil_tir as T
        >>> k = T.For(T.var("k"), T.const(0), T.const(2), "serial", T.Evaluate(0))
        >>> consumer_groups(k, {"threadIdx.x": 128, "threadIdx.y": 2})
        2
    """
    fix = ("bind 128 threads to threadIdx.x and the consumer warpgroups to threadIdx.y "
           "(gemm_wgmma's layout)")
    if extents.get("threadIdx.x") != WARPGROUP:
        _fail(loop, f"the block's threadIdx.x runs over {extents.get('threadIdx.x')} threads, "
                    f"not one warpgroup of {WARPGROUP}", fix)
    if "threadIdx.z" in extents or extents.get("threadIdx.y", 1) is None:
        _fail(loop, "the block's threads use threadIdx.z or a symbolic threadIdx.y", fix)
    return extents.get("threadIdx.y", 1)


def _registers(loop, value, groups):
    """``((producer, consumer) registers, starting count)`` of the annotation's value
    (1: no reallocation, None)."""
    if value in (1, True):
        return None
    try:
        return value, register_split(groups, value)
    except CuvilError as err:
        _fail(loop, err.message, f"give {WS_KEY!r} 1 (no register reallocation) or the "
                                 "registers of a producer and of a consumer thread, e.g. "
                                 "[40, 232] for two consumer warpgroups")


def _overlapped(stmt):
    """``(issue, drain)`` for a statement that is thread loops around one synchronous
    ``wgmma`` (``wgmma_async`` + ``wgmma_commit`` + ``wgmma_wait(1)``; after the loop,
    ``wgmma_wait(0)`` in the same thread loops), else None."""
    loops, s = [], stmt
    while isinstance(s, For) and s.kind == "thread_binding":
        loops.append(s)
        s = s.body
    call = getattr(s, "value", None)
    if not (isinstance(s, Evaluate) and getattr(call, "op", None) == WGMMA_OP):
        return None
    acc, n = call.args[2], call.args[4]

    def wrap(body):
        for lp in reversed(loops):
            body = For(lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.thread_tag,
                       lp.annotations)
        return body
    issue = wrap(seq(Evaluate(T.Call(call.dtype, WGMMA_ASYNC_OP, call.args)),
                     _call(COMMIT_OP, acc, n), _call(WAIT_OP, acc, 1, n)))
    return issue, wrap(_call(WAIT_OP, acc, 0, n))


def warp_specialized(func, loop, extents: dict, barriers, issue_ops, destination, visit):
    """The branch replacing ``loop`` (module doc).

    ``func``: the function holding ``loop``; ``extents``: the block's threadIdx extents; ``barriers(nest, count, arrivals,
    role)`` makes ``count`` mbarriers (initialised once per block; ``role``:
    ``"full"`` or ``"empty"``); ``issue_ops(nest, bar)``
    gives the arrival and ``tma_load`` of a copy nest on one barrier element;
    ``destination(nest)`` its tile; ``visit`` lowers the other statements.

    Example::

        >>> warp_specialized.__name__
        'warp_specialized'
    """
    ann = dict(loop.annotations)
    if STAGE not in ann:
        _fail(loop, f"it has no {STAGE}, which gives the ring's depth",
              f"annotate it {STAGE} as well (e.g. [0, 0, 2]: three stages)")
    groups = consumer_groups(loop, extents)
    registers = _registers(loop, ann[WS_KEY], groups)
    versions = stage_versions(func, loop)
    tiles, stmts = loop_statements(loop)
    order = list(ann.get(ORDER) or range(len(stmts)))
    copies = [st for st in stmts if isinstance(st, For) and "cuda.tma" in dict(st.annotations)]
    others = [stmts[i] for i in sorted(range(len(stmts)), key=lambda i: order[i])
              if stmts[i] not in copies]
    if not copies:
        _fail(loop, "none of its statements is a copy annotated 'cuda.tma'",
              "annotate the copies into shared memory 'cuda.tma' (the producer issues them)")
    v = max(versions.get(id(destination(c)), 1) for c in copies)
    ring = {id(destination(c)) for c in copies}
    bmap = {id(b): Buffer((IntImm(v, "int32"),) + tuple(b.shape), b.dtype, b.name,
                          scope=b.scope, align=b.align) for b in tiles if id(b) in ring}
    rings = [(c, barriers(c, v, 1, "full"), barriers(c, v, groups * WARPGROUP, "empty"))
             for c in copies]

    # the producer: its own loop variable, the copies only
    k = T.var(f"{loop.loop_var.name}_p", loop.loop_var.dtype)
    mine = For(k, loop.min, loop.extent, "serial", T.Evaluate(0))
    slot, parity = ring_slot(mine, v), ring_parity(mine, v)
    produce = []
    for c, full, empty in rings:
        ops, _ = issue_ops(c, full[slot])
        produce += [_call("mbarrier_wait", empty[slot], (parity + 1) % 2),
                    substitute(versioned(ops, bmap, slot), {loop.loop_var: k})]
    producer = For(k, loop.min, loop.extent, "serial", seq(*produce))

    # the consumers: the other statements between the waits and the releases
    slot, parity = ring_slot(loop, v), ring_parity(loop, v)
    steps = [versioned(visit(st), bmap, slot) for st in others]
    overlapped = [_overlapped(st) for st in steps]
    if all(overlapped) and len(overlapped) == 1:
        # one group of wgmma steps in flight: a stage goes back to the producer once
        # the next step's wait found the steps reading it done
        (issue, drain), = overlapped
        before = simplify(floormod(loop.loop_var - loop.min + (v - 1), v))
        release = IfThenElse(loop.loop_var > loop.min, seq(
            *[_call("mbarrier_arrive", empty[before], 0) for _, _, empty in rings]))
        body = seq(*[_call("mbarrier_wait", full[slot], parity) for _, full, _ in rings],
                   issue, release)
        after = drain
    else:
        body = seq(*[_call("mbarrier_wait", full[slot], parity) for _, full, _ in rings],
                   *steps,
                   *[_call("mbarrier_arrive", empty[slot], 0) for _, _, empty in rings])
        after = None
    for b in reversed(tiles):       # the consumers' own tiles stay per iteration
        if id(b) not in bmap:
            body = Allocate(b, body)
    keep = {key: x for key, x in ann.items() if key not in (STAGE, ORDER, ASYNC, WS_KEY)}
    consumer = For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_tag,
                   tuple(keep.items()))
    if after is not None:
        consumer = seq(consumer, after)

    ty, tx = T.var("ws_y"), T.var("ws_x")
    producer = IfThenElse(tx == 0, producer)
    if registers is not None:
        # every thread of each warpgroup: few registers for the producer, many for the
        # consumers, the starting count again where the two paths join
        (few, many), start = registers
        producer = seq(_call(SETMAXNREG_OP, few, 0), producer, _call(SETMAXNREG_OP, start, 1))
        consumer = seq(_call(SETMAXNREG_OP, many, 1), consumer, _call(SETMAXNREG_OP, start, 0))
    split = IfThenElse(ty == groups, producer, consumer)
    out = For(ty, T.const(0), T.const(groups + 1), "thread_binding",
              For(tx, T.const(0), T.const(WARPGROUP), "thread_binding", split,
                  "threadIdx.x"), "threadIdx.y")
    for b in reversed(tiles):
        if id(b) in bmap:
            out = Allocate(bmap[id(b)], out)
    return out


__all__ = ["WARPGROUP", "WS_KEY", "consumer_groups", "warp_specialized"]
