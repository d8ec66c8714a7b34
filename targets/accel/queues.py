"""Synchronisation between the engines as bounded hardware queues, and the build-time
proof that no queue of the declared depth can deadlock.

Each engine (``load``, ``store``, each compute unit, each move engine) runs its own
instruction stream; a :class:`~targets.accel.description.Queue` from engine ``f`` to
engine ``e`` carries tokens: ``<hal>_push(f, e, id)`` in ``f``'s stream when ``f`` is
done with something, ``<hal>_pop(f, e, id)`` in ``e``'s stream before ``e`` may go
on (VTA's push/pop dependence flags, Ascend's ``set_flag``/``wait_flag``; ``id`` is a
channel of the queue).  The pass finds every pair of instructions of two engines that
touch one scratchpad buffer, one writing, and places the tokens once for a whole
group of instructions, at the statement where their loop nests part::

    S: [ load A ; load B ; for ..: gemm(A, B, C) ]
       load A; load B; push(load, gemm)  |  pop(load, gemm); for ..: gemm

A dependency carried by a loop (the load into a copy of a double-buffered tile after
the GEMM's use of it ``d`` iterations earlier, ``d`` the number of copies) pops only
from iteration ``d`` on and drains its last ``d`` tokens after the loop; when the
copies turn round-robin across the enclosing loops too, the loops are counted as one
(no drain, no pipeline bubble between them)::

    for k: { if (k >= 2) pop(gemm, load); load A[k % 2]; ... gemm(A[k % 2]); push(gemm, load) }
    pop(gemm, load); pop(gemm, load)

Every push is popped exactly once and tokens are popped in the order they were pushed
(one channel per kind of dependency), so a pop waits for the push it was meant for.

The proof (:func:`check_queues`): a program whose host order never holds more than
``depth`` tokens in a channel cannot deadlock, whatever the engines' speeds (the
earliest blocked instruction in host order could always go on); the check counts the
tokens in host order and refuses a deeper need with
:class:`~targets.accel.errors.QueueDepthError` (CVL-E175) naming the two engines and
the depth needed, or, with the target option ``on_shallow_queue="serialise"``, lets
a multi-buffered loop run only ``depth`` copies ahead.

Example::

    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> sync_names(toy_npu)
    ('toy_npu_push', 'toy_npu_pop')
"""

from __future__ import annotations

import dataclasses
import json

from cuvil_tir.expr import IntImm, Var
from cuvil_tir.op import call_extern
from cuvil_tir.transform import PassContext
from cuvil_tir.arith.affine import linear_form
from cuvil_tir.stmt import BufferRegion, Evaluate, For, IfThenElse, SeqStmt
from cuvil_tir.transform.software_pipeline import VERSIONS
from cuvil_tir.visitor import post_order_visit

from .errors import AccelLoweringError, QueueDepthError
from .tokens import accesses


def sync_names(acc) -> tuple:
    """The HAL's ``(push, pop)`` functions of accelerator ``acc``."""
    return f"{acc.hal}_push", f"{acc.hal}_pop"


@dataclasses.dataclass
class _Site:
    engine: str
    uses: list          # [(buffer name, writes, slot expr or None)]
    path: tuple         # steps from the body: ("seq", node, k) | ("for", node) | ...
    regions: dict = dataclasses.field(default_factory=dict)   # buffer -> [regions]


def _sites(body, acc, versions) -> list:
    out = []

    def walk(s, path):
        if isinstance(s, SeqStmt):
            for k, c in enumerate(s.seq):
                walk(c, path + (("seq", s, k),))
        elif isinstance(s, For):
            walk(s.body, path + (("for", s),))
        elif isinstance(s, Evaluate):
            name = getattr(s.value, "op", None) == "call_extern" and s.value.args[0].value
            if name in acc.engine_of:
                regions = {}
                # an intrinsic's regions are its whole operands; a DMA's or a move's
                # name only a tile's first row, so they never prove tiles apart
                exact = name not in acc.move_of and name not in acc.dma_calls
                for r in s.value.args[2:]:
                    if isinstance(r, BufferRegion) and exact:
                        regions.setdefault(r.buffer.name, []).append(r)
                out.append(_Site(acc.engine_of[name], [(b.name, w, sl) for b, w, sl in
                                                       accesses(s.value, acc, versions)],
                                 path + (("leaf", s),), regions))
        elif hasattr(s, "body") and not isinstance(s, IfThenElse):
            walk(s.body, path + (("one", s),))
        else:   # an if (or anything else) is one step: its instructions share it
            found = []
            post_order_visit(s, lambda n: found.append(n) if isinstance(n, Evaluate) else None)
            for ev in found:
                name = getattr(ev.value, "op", None) == "call_extern" and ev.value.args[0].value
                if name in acc.engine_of:
                    out.append(_Site(acc.engine_of[name], [
                        (b.name, w, sl) for b, w, sl in accesses(ev.value, acc, versions)],
                        path + (("leaf", s),)))

    walk(body, ())
    return out


def _key(step):
    return (step[0], id(step[1])) + tuple(step[2:])


def _mentions(expr, var) -> bool:
    found = []
    if expr is not None:
        post_order_visit(expr, lambda n: found.append(n) if n is var else None)
    return bool(found)


def _apart(rp, rq, var) -> bool:
    """Whether regions ``rp`` and ``rq`` (of one buffer) never overlap in two different
    iterations of the loop of ``var``: along some dimension both start at the same
    ``s * var + rest`` and neither is wider than ``|s|`` (the tiles of an output row
    that a loop walks through)."""
    for dp, dq in zip(rp.region, rq.region):
        fp, fq = linear_form(dp.min), linear_form(dq.min)
        if fp is None or fq is None or not isinstance(dp.extent, IntImm) or \
                not isinstance(dq.extent, IntImm):
            continue
        terms_p = {k: c for k, (_, c) in fp[0].items() if c}
        terms_q = {k: c for k, (_, c) in fq[0].items() if c}
        s = terms_p.get(id(var), 0)
        if s and terms_p == terms_q and fp[1] == fq[1] and \
                abs(s) >= max(dp.extent.value, dq.extent.value):
            return True
    return False


@dataclasses.dataclass
class _Stream:
    """One channel's placements: pushes after, pops before children of ``seq``."""
    src: str
    dst: str
    seq: object
    pairs: dict          # consumer child -> producer child
    buffers: set
    distance: int = 0    # 0: within one iteration; d: carried d iterations by ``loop``
    apart: bool = False  # the carrying loop's iterations touch disjoint tiles
    prefix: tuple = ()   # the steps down to the carrying loop
    slot_vars: list = dataclasses.field(default_factory=list)   # loops naming a copy
    versions: int = 0    # the fewest copies of its buffers (0: none versioned)


def _rules(sites, versions, alias=frozenset()) -> dict:
    """``{key: _Stream}``, before pruning (module doc).  ``alias``: pairs of buffers
    the allocator placed at overlapping addresses (their lifetimes apart): one
    resource, so the reuse waits for the last use before it (a pair's token carries
    no copy slot: it orders whole buffers)."""
    rules = {}
    for p in sites:
        for q in sites:
            if p.engine == q.engine:
                continue
            for bp, wp, sp in p.uses:
                for bq, wq, sq in q.uses:
                    if not (wp or wq):
                        continue
                    if bp == bq:
                        _add(rules, p, q, bp, sp, sq, versions)
                    elif (bp, bq) in alias:
                        _add(rules, p, q, f"{bp}~{bq}", None, None, versions)
    return rules


def aliases(plan: dict) -> frozenset:
    """The ordered pairs of buffers whose address ranges overlap in ``plan`` (the
    allocator's ``{memory: [unit data]}``, every copy of a multi-buffered tile).

    Example::

        >>> sorted(aliases({"m": [{"buffer": "A", "bytes": 64, "addresses": [0]},
        ...                       {"buffer": "B", "bytes": 32, "addresses": [32]},
        ...                       {"buffer": "C", "bytes": 16, "addresses": [64]}]}))
        [('A', 'B'), ('B', 'A')]
    """
    out = set()
    for units in plan.values():
        spans = [(u["buffer"], a, a + u["bytes"]) for u in units for a in u["addresses"]]
        for n, a0, a1 in spans:
            for m, b0, b1 in spans:
                if n != m and a0 < b1 and b0 < a1:
                    out.add((n, m))
    return frozenset(out)


def _add(rules, p, q, buf, sp, sq, versions):
    k = 0
    while k < min(len(p.path), len(q.path)) and _key(p.path[k]) == _key(q.path[k]):
        k += 1
    if k == len(p.path) or k == len(q.path) or p.path[k][0] != "seq":
        raise AccelLoweringError(
            f"engines {p.engine!r} and {q.engine!r} both touch buffer {buf!r} inside one "
            "'if' (or one statement), where no token can order them; keep the "
            "instructions of different engines out of a shared condition")
    seq, a, b = p.path[k][1], p.path[k][2], q.path[k][2]
    if a < b:
        st = rules.setdefault(("fwd", id(seq), p.engine, q.engine),
                              _Stream(p.engine, q.engine, seq, {}, set()))
    else:
        loops = [j for j in range(k) if p.path[j][0] == "for"]
        if not loops:
            return
        loop = p.path[loops[-1]][1]
        d = 1
        if buf in versions and (_mentions(sp, loop.loop_var) or _mentions(sq, loop.loop_var)):
            d = versions[buf]
        apart = bool(p.regions.get(buf)) and bool(q.regions.get(buf)) and all(
            _apart(rp, rq, loop.loop_var) for rp in p.regions[buf] for rq in q.regions[buf])
        st = rules.setdefault(("carried", id(seq), p.engine, q.engine, d, id(loop), apart),
                              _Stream(p.engine, q.engine, seq, {}, set(), distance=d,
                                      prefix=p.path[:loops[-1] + 1], apart=apart))
    st.pairs[b] = max(st.pairs.get(b, a), a)
    st.buffers.add(buf)
    for e in (sp, sq):
        if e is not None:
            post_order_visit(e, lambda n: st.slot_vars.append(n) if isinstance(n, Var) else None)
    if buf in versions:
        st.versions = min(st.versions or versions[buf], versions[buf])


def _kept(pairs: dict) -> list:
    """``[(producer child, consumer child)]`` without the pops an earlier pop of the
    same channel already covers (an in-order engine waits once)."""
    out, last = [], -1
    for b in sorted(pairs):
        if pairs[b] > last:
            out.append((pairs[b], b))
            last = pairs[b]
    return out


def _extent(loop) -> int:
    if not isinstance(loop.extent, IntImm) or not isinstance(loop.min, IntImm):
        raise AccelLoweringError(
            f"loop {loop.loop_var.name!r} has bounds {loop.min}, {loop.extent}; the "
            "queues between engines are placed and proven deadlock-free at build time, "
            "which needs constant loop bounds on an accelerator")
    return loop.extent.value


def _linear(chain) -> tuple:
    """``(linear index expression, iterations)`` of ``chain`` (innermost loop first)."""
    lin, n = IntImm(0, "int32"), 1
    for lp in chain:
        lin = lin + (lp.loop_var - lp.min) * IntImm(n, "int32")
        n *= _extent(lp)
    return lin, n


def _named(var, names) -> bool:
    return any(v is var for v in names)


class _Placement:
    """Statements to insert: before/after children of seqs, after whole nodes."""

    def __init__(self):
        self.before, self.after, self.head, self.tail = {}, {}, {}, {}
        self.guards = {}         # id(if) -> (loops, lo, hi): lo <= their index < hi
        self.ops = {}            # id(evaluate) -> (src, dst, channel, push?)

    def op(self, acc, src, dst, ch, push):
        name = sync_names(acc)[0 if push else 1]
        eid = {e: k for k, e in enumerate(acc.engines)}
        ev = Evaluate(call_extern("int32", name, IntImm(eid[src], "int32"),
                                  IntImm(eid[dst], "int32"), IntImm(ch, "int32")))
        self.ops[id(ev)] = (src, dst, ch, push)
        return ev

    def rebuild(self, s):
        if isinstance(s, SeqStmt):
            kids = []
            for k, c in enumerate(s.seq):
                kids += self.before.get((id(s), k), []) + [self.rebuild(c)] + \
                    self.after.get((id(s), k), [])
            out = SeqStmt(tuple(kids))
        elif isinstance(s, (For,)) or (hasattr(s, "body") and not isinstance(s, IfThenElse)
                                       and not isinstance(s, Evaluate)):
            out = dataclasses.replace(s, body=self.rebuild(s.body))
        else:
            out = s
        head, tail = self.head.get(id(s), []), self.tail.get(id(s), [])
        return SeqStmt(tuple(head) + (out,) + tuple(tail)) if head or tail else out

    def guard(self, chain, lo, hi, stmts):
        """``stmts`` run while ``lo <= (linear index of chain) < hi``."""
        lin, n = _linear(chain)
        lo, hi = max(lo, 0), min(hi, n)
        if lo >= hi:
            return None
        if lo == 0 and hi == n:
            return stmts
        cond = lin >= IntImm(lo, "int32") if hi == n else (
            lin < IntImm(hi, "int32") if lo == 0 else
            (lin >= IntImm(lo, "int32")) & (lin < IntImm(hi, "int32")))
        out = IfThenElse(cond, stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts)))
        self.guards[id(out)] = (chain, lo, hi)
        return [out]

    def at(self, table, key, stmts):
        if stmts:
            table.setdefault(key, []).extend(stmts)

    def carried(self, acc, st, a, b, channel, serialise):
        """A dependency carried ``st.distance`` iterations by its loop (module doc):
        one channel when the copies turn round-robin up to the outermost loop, else
        one within each run of the loops and one across runs."""
        loop, d = st.prefix[-1][1], st.distance
        outer = [x[1] for x in reversed(st.prefix[:-1]) if x[0] == "for"]
        chain, rest = [loop], list(outer)
        if st.apart and not rest:     # one run of the loop, its iterations disjoint
            return
        if (d == 1 or _extent(loop) % d == 0) and not st.apart:
            while rest and not _named(rest[0].loop_var, st.slot_vars):
                chain.append(rest.pop(0))
        depth = acc.queues[st.src, st.dst].depth
        c = min(d, depth) if serialise else d
        _, n = _linear(chain)
        key, c1 = id(st.seq), min(c, n)
        ops = self.op
        if not rest:                # one channel counts every iteration of the program
            ch = channel()
            self.at(self.after, (key, a), [ops(acc, st.src, st.dst, ch, True)])
            self.at(self.before, (key, b),
                    self.guard(chain, c, n, [ops(acc, st.src, st.dst, ch, False)]))
            self.at(self.tail, id(chain[-1]),
                    [ops(acc, st.src, st.dst, ch, False) for _ in range(c1)])
            return
        # within one run of the chain: iteration t waits for t - c (unless they touch
        # disjoint tiles)
        if not st.apart:
            ch = channel()
            self.at(self.after, (key, a),
                    self.guard(chain, 0, n - c, [ops(acc, st.src, st.dst, ch, True)]))
            self.at(self.before, (key, b),
                    self.guard(chain, c, n, [ops(acc, st.src, st.dst, ch, False)]))
        # across runs: the last c1 iterations' tokens, popped before the run that
        # reuses their copies (D runs later when an outer loop turns the copies)
        cross = channel()
        m = rest[0]
        runs = st.versions if _named(m.loop_var, st.slot_vars) and st.versions and \
            _extent(m) % st.versions == 0 else 1
        _, total = _linear(rest)
        self.at(self.after, (key, a),
                self.guard(chain, n - c1, n, [ops(acc, st.src, st.dst, cross, True)]))
        self.at(self.head, id(chain[-1]),
                self.guard(rest, runs, total,
                           [ops(acc, st.src, st.dst, cross, False) for _ in range(c1)]))
        self.at(self.tail, id(rest[-1]), [ops(acc, st.src, st.dst, cross, False)
                                          for _ in range(c1 * min(runs, total))])


def insert_queues(func, acc):
    """Place pushes and pops on the accelerator's queues (module doc) and prove them
    deadlock-free for the declared depths; ``accel.queues`` (JSON) records each
    channel's engines, buffers and the most tokens it holds."""
    versions = dict(func.attr(VERSIONS, ()))
    sites = _sites(func.body, acc, versions)
    rules = _rules(sites, versions, aliases(json.loads(func.attr("accel.plan", "{}"))))
    pl, channels, nxt = _Placement(), [], {}
    target = PassContext.current().target
    serialise = target is not None and \
        target.options.get("on_shallow_queue", "error") == "serialise"
    for st in rules.values():
        ids = []

        def channel(st=st, ids=ids):
            k = nxt.get((st.src, st.dst), 0)
            nxt[(st.src, st.dst)] = k + 1
            ids.append(k)
            return k

        for a, b in _kept(st.pairs):
            if st.distance:
                pl.carried(acc, st, a, b, channel, serialise)
            else:
                ch = ids[0] if ids else channel()
                pl.at(pl.after, (id(st.seq), a), [pl.op(acc, st.src, st.dst, ch, True)])
                pl.at(pl.before, (id(st.seq), b), [pl.op(acc, st.src, st.dst, ch, False)])
        channels += [{"src": st.src, "dst": st.dst, "id": k, "buffers": sorted(st.buffers),
                      "distance": st.distance} for k in ids]
    body = pl.rebuild(func.body) if rules else func.body
    check_queues(body, acc, pl, channels)
    out = func if body is func.body else func.with_body(body)
    return out.with_attr("accel.queues", json.dumps(channels))


def check_queues(body, acc, pl, channels) -> None:
    """Count the tokens of every channel in host order (module doc); refuse a channel
    that needs more than its queue's depth, or more channels than the queue has."""
    has = set()

    def mark(s):
        if id(s) in pl.ops:
            has.add(id(s))
        kids = [getattr(s, "body", None), getattr(s, "then_case", None)] + \
            list(getattr(s, "seq", ()))
        if any(id(k) in has for k in kids if k is not None):
            has.add(id(s))

    post_order_visit(body, mark)
    count, peak, env = {}, {}, {}

    def run(s):
        if id(s) in pl.ops:
            src, dst, ch, push = pl.ops[id(s)]
            k = (src, dst, ch)
            count[k] = count.get(k, 0) + (1 if push else -1)
            if count[k] < 0:
                raise AccelLoweringError(f"internal: channel {k} popped before a push")
            peak[k] = max(peak.get(k, 0), count[k])
        elif id(s) not in has:
            return
        elif id(s) in pl.guards:
            chain, lo, hi = pl.guards[id(s)]
            lin, n = 0, 1
            for lp in chain:
                lin += (env[lp.loop_var] - lp.min.value) * n
                n *= lp.extent.value
            if lo <= lin < hi:
                run(s.then_case)
        elif isinstance(s, SeqStmt):
            for c in s.seq:
                run(c)
        elif isinstance(s, For):
            lo = s.min.value
            for i in range(lo, lo + _extent(s)):
                env[s.loop_var] = i
                run(s.body)
        elif hasattr(s, "body"):
            run(s.body)

    run(body)
    used = {}
    for ch in channels:
        k = (ch["src"], ch["dst"], ch["id"])
        ch["tokens"] = peak.get(k, 0)
        used[ch["src"], ch["dst"]] = used.get((ch["src"], ch["dst"]), 0) + 1
    for (src, dst), n in used.items():
        q = acc.queues[src, dst]
        if n > q.ids:
            raise QueueDepthError(
                f"accelerator {acc.name!r}: this program needs {n} channels from engine "
                f"{src!r} to engine {dst!r}, but Queue({src!r}, {dst!r}) has ids={q.ids}; "
                f"declare Queue({src!r}, {dst!r}, depth={q.depth}, ids={n})")
    for ch in channels:
        q = acc.queues[ch["src"], ch["dst"]]
        if ch["tokens"] > q.depth:
            why = (f"{', '.join(ch['buffers'])} {'is' if len(ch['buffers']) == 1 else 'are'} "
                   f"kept in {ch['distance']} copies, so {ch['dst']!r} may run "
                   f"{ch['distance']} uses ahead of {ch['src']!r}" if ch["distance"] > 1 else
                   f"it orders their uses of {', '.join(ch['buffers'])}")
            raise QueueDepthError(
                f"accelerator {acc.name!r}: the queue from engine {ch['src']!r} to engine "
                f"{ch['dst']!r} has depth {q.depth}, but this program holds up to "
                f"{ch['tokens']} tokens in it at once ({why}); a push into the full queue "
                "would wait for a pop that only comes later, and the engines could "
                f"deadlock.  Declare Queue({ch['src']!r}, {ch['dst']!r}, "
                f"depth={ch['tokens']}), or build with on_shallow_queue='serialise' (the "
                f"copies are then reused after {q.depth} uses: less overlap)")


__all__ = ["aliases", "check_queues", "insert_queues", "sync_names"]
