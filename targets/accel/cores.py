"""Several cores on one accelerator: the description (:class:`Cores`), ``bind`` of a
tile loop to the core axis, and the simulator's model of cores running together.

A device with ``cores=Cores(4, axis="asc.core", shared=("asc.l2",), bandwidth=...)``
has four copies of every memory except the shared ones (each core its own L1, L0, UB;
one L2 for all), four copies of every engine, and links whose bandwidth the cores
share (``bandwidth``: bytes per cycle of host memory, ``"global"``, and of each
shared memory; a transfer touching one holds it for ``bytes / bandwidth`` cycles, so
four cores loading at once wait for each other).

Scheduling uses the primitives users know: ``sch.bind(loop, "asc.core")`` runs
iteration ``c`` of ``loop`` on core ``c`` (at most ``count`` iterations: split the
loop first).  The lowering (:func:`bind_cores`) turns the bound loop into
``<hal>_fork(); for (c...) { <hal>_core(c); ... } <hal>_join();``: the cores start
once what was issued before the loop is done (the fork: a tile loaded into the shared
L2 above it is there for all of them), each core's engines keep their own timelines
and queues, and the join is a barrier where the results meet.  A buffer of a per-core memory must be staged
under the bound loop (each core loads its own copy); a buffer of a shared memory
above it (one copy that every core reads) -- :func:`check_placement` says which when
not.  ``parallel`` is refused: a core's memories are its own, so tiles go to cores
with ``bind``.

The simulator runs the cores one after another on the host, each with its own copy
of the per-core memories (swapped in when the program switches to it, so a core
that read what another staged would compute garbage, as on the device), while the
cycle model gives each its own clocks, queues and banks, and one calendar per shared
link that every core's transfers reserve time on (:func:`cores_c`).

Example::

    >>> c = Cores(4, axis="npu.core", shared=("npu.l2",), bandwidth={"global": 64})
    >>> c.thread_axis().limit, c.is_shared("npu.l2"), c.is_shared("npu.l1")
    (4, True, False)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cuvil_tir.expr import BufferLoad, IntImm
from cuvil_tir.op import call_extern
from cuvil_tir.stmt import BlockRealize, BufferStore, Evaluate, For, SeqStmt
from cuvil_tir.thread_axes import ThreadAxis
from cuvil_tir.visitor import Mutator, post_order_visit

from .errors import AccelLoweringError, DescriptionError
from .queue_hal import queue_geometry

CORE_LOOP = "accel.core_loop"           # annotation of the loop bound to the cores
CAL_MAX = 1 << 15                       # busy intervals kept per link calendar


@dataclass(frozen=True)
class Cores:
    """The cores of an accelerator (module doc): ``count`` cores, the thread axis
    ``axis`` that ``bind`` names, the ``shared`` memories (all others are per core)
    and the ``bandwidth`` in bytes per cycle of each shared level (``"global"``: host
    memory; a level not named is not a bottleneck).

    Example::

        >>> Cores(0, axis="npu.core")
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] Cores: count must be a positive int, found 0
    """

    count: int
    axis: str = "npu.core"
    shared: tuple = ()
    bandwidth: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 1:
            raise DescriptionError(f"Cores: count must be a positive int, found {self.count!r}")
        if not isinstance(self.axis, str) or not re.fullmatch(r"[A-Za-z_]\w*(\.\w+)+",
                                                              self.axis):
            raise DescriptionError(f"Cores: axis must be a dotted name such as 'npu.core' "
                                   f"(what sch.bind names), found {self.axis!r}")
        object.__setattr__(self, "shared", tuple(self.shared))
        if not isinstance(self.bandwidth, dict):
            raise DescriptionError(f"Cores: bandwidth must be a dict {{level: bytes per "
                                   f"cycle}}, found {self.bandwidth!r}")
        for level, bw in self.bandwidth.items():
            if not isinstance(bw, int) or isinstance(bw, bool) or bw < 1:
                raise DescriptionError(f"Cores: bandwidth[{level!r}] must be a positive int "
                                       f"(bytes per cycle), found {bw!r}")

    def check(self, owner: str, scopes) -> None:
        """Every shared memory and bandwidth level is one of the device's."""
        for s in self.shared:
            if s not in scopes:
                raise DescriptionError(f"{owner}: Cores.shared names memory {s!r}, which is "
                                       f"not one of its memories ({', '.join(scopes)})")
        for level in self.bandwidth:
            if level != "global" and level not in self.shared:
                raise DescriptionError(
                    f"{owner}: Cores.bandwidth names {level!r}; name 'global' (host "
                    f"memory) or a shared memory ({', '.join(self.shared) or 'none'})")

    def is_shared(self, scope: str) -> bool:
        """Whether memory ``scope`` is one for all cores."""
        return scope in self.shared

    def thread_axis(self) -> ThreadAxis:
        """The axis ``bind`` names: a grid-level axis of ``count`` indices."""
        return ThreadAxis(self.axis, "grid", 0, limit=self.count)

    def links(self) -> list:
        """The shared levels with a bandwidth, in a fixed order (the simulator's links)."""
        return sorted(self.bandwidth, key=lambda x: (x != "global", x))

    def describe(self) -> dict:
        """The cores as data for a build's key."""
        return {"count": self.count, "axis": self.axis, "shared": list(self.shared),
                "bandwidth": sorted(self.bandwidth.items())}


def link_of(acc, *levels) -> int:
    """The simulator's link index of the first of ``levels`` with a bandwidth, or -1.

    Example::

        >>> from targets.accel.examples.toy_npu import toy_npu
        >>> link_of(toy_npu, "global")
        -1
    """
    cores = getattr(acc, "cores", None)
    links = cores.links() if cores is not None else []
    return next((links.index(x) for x in levels if x in links), -1)


def _where(loop) -> str:
    return f"loop '{loop.loop_var.name}' (extent {loop.extent})"


class _Bind(Mutator):
    """Turn the loop bound to the core axis into the fork/core/join form."""

    def __init__(self, acc):
        self.acc, self.depth, self.used = acc, 0, 0

    def visit_For(self, s):
        cores = self.acc.cores
        if s.kind == "parallel":
            axis = cores.axis if cores is not None else None
            raise AccelLoweringError(
                f"accelerator '{self.acc.name}': {_where(s)} is parallel, but a core's "
                "memories are its own and parallel iterations would share one "
                + (f"scratchpad; distribute the tiles with sch.bind(loop, {axis!r})"
                   if axis else "scratchpad and this device has one core; keep it serial"))
        if s.kind != "thread_binding":
            return Mutator.generic_visit(self, s)
        if cores is None or s.thread_tag != cores.axis:
            have = (f"its core axis is {cores.axis!r} ({cores.count} cores)" if cores
                    else "it has one core (nothing to bind)")
            raise AccelLoweringError(
                f"accelerator '{self.acc.name}': {_where(s)} is bound to "
                f"{s.thread_tag!r}, which is not an axis of this device: {have}; "
                + (f"bind tile loops to {cores.axis!r}" if cores else "remove the bind"))
        if self.depth:
            raise AccelLoweringError(
                f"accelerator '{self.acc.name}': {_where(s)} is bound to {cores.axis!r} "
                "inside another loop bound to it; bind one loop (fuse the two first)")
        n = s.extent.value if isinstance(s.extent, IntImm) else None
        if n is None or n > cores.count:
            raise AccelLoweringError(
                f"accelerator '{self.acc.name}': {_where(s)} is bound to {cores.axis!r}, "
                f"but the device has {cores.count} cores: too many cores; split it "
                f"(sch.split(loop, [{cores.count}, None])) and bind the outer loop")
        _check_divisible(self.acc, s)
        self.depth += 1
        body = self.visit(s.body)
        self.depth -= 1
        self.used = max(self.used, n)
        hal = self.acc.hal
        body = SeqStmt((Evaluate(call_extern("int32", f"{hal}_core", s.loop_var)), body))
        ann = dict(s.annotations or {})
        ann[CORE_LOOP] = n
        loop = For(s.loop_var, s.min, s.extent, "serial", body, None, ann)
        return SeqStmt((Evaluate(call_extern("int32", f"{hal}_fork")), loop,
                        Evaluate(call_extern("int32", f"{hal}_join"))))


def _check_divisible(acc, loop) -> None:
    """A core's tile must be whole: no predicate below the bound loop may name it."""
    var, found = loop.loop_var, []

    def look(n):
        if isinstance(n, BlockRealize) and not _true(n.predicate) and \
                not _host_copy(acc, n.block.body):
            used = []
            post_order_visit(n.predicate, lambda e: used.append(e) if e is var else None)
            if used:
                found.append(n.block.name)

    post_order_visit(loop.body, look)
    if found:
        raise AccelLoweringError(
            f"accelerator '{acc.name}': {_where(loop)} bound to {acc.cores.axis!r} does "
            f"not divide its dimension: block '{found[0]}' is guarded by a predicate on "
            f"'{var.name}' (the last core's tile is partial); pad the dimension to a "
            "multiple of the cores times the tile (pad_einsum) or split by a factor that "
            "divides it")


def _host_copy(acc, body) -> bool:
    """Whether ``body`` copies between host memory and the device (a DMA transfer,
    which moves only the valid part of an edge tile)."""
    load = getattr(body, "value", None)
    if not isinstance(body, BufferStore) or not isinstance(load, BufferLoad):
        return False
    return (body.buffer.scope in acc.scopes) != (load.buffer.scope in acc.scopes)


def _true(e) -> bool:
    return isinstance(e, IntImm) and bool(e.value)


def bind_cores(func, acc):
    """The lowering of ``bind`` to the core axis (module doc); sets the attribute
    ``accel.cores`` to the number of cores the function uses.

    Example::

        >>> import cuvil_tir as T
        >>> from targets.accel.examples.toy_npu import toy_npu
        >>> A = T.decl_buffer((4,), "int32", "A")
        >>> i = T.var("i")
        >>> f = T.PrimFunc([A], T.For(i, T.const(0), T.const(4), "parallel",
        ...                           T.BufferStore(A, T.const(0, "int32"), (i,))))
        >>> bind_cores(f, toy_npu)
        Traceback (most recent call last):
          ...
        targets.accel.errors.AccelLoweringError: [CVL-E172] accelerator 'toy-npu': loop 'i' (extent 4) is parallel, but a core's memories are its own and parallel iterations would share one scratchpad and this device has one core; keep it serial
    """
    m = _Bind(acc)
    body = m.visit(func.body)
    out = func if body is func.body else func.with_body(body)
    return out.with_attr("accel.cores", max(m.used, 1))


def check_placement(func, acc):
    """A per-core buffer lives under the bound loop, a shared one above it (module
    doc); run on lowered blocks (``Allocate`` nodes where the planner put them)."""
    cores = acc.cores
    if cores is None:
        return func
    loops = []
    post_order_visit(func.body, lambda n: loops.append(n) if isinstance(n, For) and
                     CORE_LOOP in dict(n.annotations or ()) else None)
    if not loops:
        return func
    inside = set()
    for lp in loops:
        post_order_visit(lp.body, lambda n: inside.add(id(n.buffer))
                         if type(n).__name__ == "Allocate" else None)
    used, written = set(), set()
    for lp in loops:
        post_order_visit(lp.body, lambda n: used.add(n.buffer.name)
                         if hasattr(n, "buffer") and hasattr(n, "indices") else None)
        post_order_visit(lp.body, lambda n: written.add(n.buffer.name)
                         if isinstance(n, BufferStore) else None)

    def look(n):
        if type(n).__name__ != "Allocate" or n.buffer.scope not in acc.scopes:
            return
        b, shared = n.buffer, cores.is_shared(n.buffer.scope)
        if shared and (id(b) in inside or b.name in written):
            raise AccelLoweringError(
                f"accelerator '{acc.name}': buffer '{b.name}' of shared memory "
                f"'{b.scope}' is {'staged' if id(b) in inside else 'written'} inside the "
                f"loop bound to {cores.axis!r}: every core would write the one copy; stage "
                "it above the bound loop (one copy every core reads) or in a per-core "
                "memory")
        if not shared and id(b) not in inside and b.name in used:
            raise AccelLoweringError(
                f"accelerator '{acc.name}': buffer '{b.name}' of per-core memory "
                f"'{b.scope}' is staged above the loop bound to {cores.axis!r}, but every "
                "core reads it and each core has its own copy of that memory; stage it "
                f"under the bound loop (compute_at) or in a shared memory "
                f"({', '.join(cores.shared) or 'the device has none'})")

    post_order_visit(func.body, look)
    return func


def cores_header(acc) -> list:
    """The HAL declarations of the core calls (none on a single-core device)."""
    if acc.cores is None:
        return []
    h = acc.hal
    return [f"/* {acc.cores.count} cores: fork before the loop bound to them, core(c) at "
            "the start of core c's iteration, join (a barrier) after it */",
            f"int32_t {h}_fork(void);", f"int32_t {h}_core(int32_t core);",
            f"int32_t {h}_join(void);"]


def cores_c(acc, nbanks: int) -> str:
    """The simulator's cores and links: per-core state swapped in on ``core(c)`` (the
    engines' clocks, the banks, the per-core memories), the fork and join, and one
    busy calendar per shared link.  Always emitted: a single-core device has one core
    and no links."""
    h, ne = acc.hal, len(acc.engines)
    cores = acc.cores
    nc = cores.count if cores is not None else 1
    links = cores.links() if cores is not None else []
    bw = ", ".join(str(cores.bandwidth[x]) for x in links) or "1"
    nl = max(len(links), 1)
    out = [f"""static int cvl_core;
int64_t cvl_busy_core[{nc * ne}];
int64_t cvl_link_stalls;
static const int64_t cvl_link_bw[{nl}] = {{{bw}}};
static int64_t cvl_cal[{nl}][{CAL_MAX}][2];
static int cvl_cal_n[{nl}];
/* the earliest s >= t at which link l is free for dur cycles; reserves it */
static int64_t cvl_link_slot(int l, int64_t t, int64_t dur) {{
    int64_t (*cal)[2] = cvl_cal[l];
    if (cvl_cal_n[l] == {CAL_MAX}) {{  /* full: close the earliest gap (conservative) */
        cal[0][1] = cal[1][1];
        memmove(cal[1], cal[2], sizeof cal[0] * (size_t)({CAL_MAX} - 2));
        --cvl_cal_n[l];
    }}
    int n = cvl_cal_n[l], lo = 0, hi = n;
    while (lo < hi) {{ int mid = (lo + hi) / 2; if (cal[mid][1] <= t) lo = mid + 1; else hi = mid; }}
    int k = lo;
    int64_t s = t;
    while (k < n && cal[k][0] < s + dur) {{ if (cal[k][1] > s) s = cal[k][1]; ++k; }}
    if (dur <= 0) return s;
    int merge_lo = k > 0 && cal[k - 1][1] == s, merge_hi = k < n && cal[k][0] == s + dur;
    if (merge_lo && merge_hi) {{
        cal[k - 1][1] = cal[k][1];
        memmove(cal[k], cal[k + 1], sizeof cal[0] * (size_t)(n - k - 1));
        --cvl_cal_n[l];
    }} else if (merge_lo) cal[k - 1][1] = s + dur;
    else if (merge_hi) cal[k][0] = s;
    else {{
        memmove(cal[k + 1], cal[k], sizeof cal[0] * (size_t)(n - k));
        cal[k][0] = s; cal[k][1] = s + dur;
        ++cvl_cal_n[l];
    }}
    return s;
}}"""]
    if cores is not None:
        # each core's own copy of its per-core memories, swapped in with its state
        own = [(k, m.capacity_bytes) for k, m in enumerate(acc.memories_only)
               if not cores.is_shared(m.scope)]
        decl = "\n".join(f"static uint8_t cvl_c_mem{k}[{nc}][{cap}];" for k, cap in own)
        save = "\n".join(f"    memcpy(cvl_c_mem{k}[c], cvl_mem{k}, {cap});" for k, cap in own)
        load = "\n".join(f"    memcpy(cvl_mem{k}, cvl_c_mem{k}[c], {cap});" for k, cap in own)
        nq, ring = queue_geometry(acc)
        ring_fly = acc.dma.outstanding
        out.append(f"""{decl}
static int64_t cvl_c_clock[{nc}][{ne}], cvl_c_ready[{nc}][{ne}], cvl_c_done[{nc}][{ne}];
static int64_t cvl_c_fly[{nc}][{ne}][{ring_fly}], cvl_c_flyn[{nc}][{ne}];
static int64_t cvl_c_bs[{nc}][{nbanks}][{ne}], cvl_c_be[{nc}][{nbanks}][{ne}];
static int64_t cvl_f_time, cvl_f_pushes[{nq}], cvl_f_pops[{nq}];
static int cvl_entered[{nc}];
static void cvl_save(int c) {{
    memcpy(cvl_c_clock[c], cvl_clock, sizeof cvl_clock);
    memcpy(cvl_c_ready[c], cvl_ready, sizeof cvl_ready);
    memcpy(cvl_c_done[c], cvl_done, sizeof cvl_done);
    memcpy(cvl_c_fly[c], cvl_fly, sizeof cvl_fly);
    memcpy(cvl_c_flyn[c], cvl_flyn, sizeof cvl_flyn);
    memcpy(cvl_c_bs[c], cvl_bs, sizeof cvl_bs); memcpy(cvl_c_be[c], cvl_be, sizeof cvl_be);
{save}
}}
static void cvl_restore(int c) {{
    memcpy(cvl_clock, cvl_c_clock[c], sizeof cvl_clock);
    memcpy(cvl_ready, cvl_c_ready[c], sizeof cvl_ready);
    memcpy(cvl_done, cvl_c_done[c], sizeof cvl_done);
    memcpy(cvl_fly, cvl_c_fly[c], sizeof cvl_fly);
    memcpy(cvl_flyn, cvl_c_flyn[c], sizeof cvl_flyn);
    memcpy(cvl_bs, cvl_c_bs[c], sizeof cvl_bs); memcpy(cvl_be, cvl_c_be[c], sizeof cvl_be);
{load}
}}
static void cvl_cores_reset(void) {{
    cvl_core = 0;
    memset(cvl_c_clock, 0, sizeof cvl_c_clock); memset(cvl_c_ready, 0, sizeof cvl_c_ready);
    memset(cvl_c_done, 0, sizeof cvl_c_done); memset(cvl_c_fly, 0, sizeof cvl_c_fly);
    memset(cvl_c_flyn, 0, sizeof cvl_c_flyn);
    memset(cvl_c_bs, 0, sizeof cvl_c_bs); memset(cvl_c_be, 0, sizeof cvl_c_be);
    memset(cvl_entered, 0, sizeof cvl_entered);
    memset(cvl_cal_n, 0, sizeof cvl_cal_n); memset(cvl_busy_core, 0, sizeof cvl_busy_core);
    cvl_link_stalls = 0;
}}
/* the cores start when what the program issued before the loop (on core 0's engines)
   is done: a tile loaded into the shared L2 there is there for all of them */
int32_t {h}_fork(void) {{
    cvl_f_time = 0;
    for (int e = 0; e < {ne}; ++e) {{
        if (cvl_clock[e] > cvl_f_time) cvl_f_time = cvl_clock[e];
        if (cvl_ready[e] > cvl_f_time) cvl_f_time = cvl_ready[e];
        if (cvl_done[e] > cvl_f_time) cvl_f_time = cvl_done[e];
    }}
    memcpy(cvl_f_pushes, cvl_qpushes, sizeof cvl_qpushes);
    memcpy(cvl_f_pops, cvl_qpops, sizeof cvl_qpops);
    memset(cvl_entered, 0, sizeof cvl_entered);
    return 0;
}}
/* The queues keep host order across the loop (the build proved their depths in that
   order), but a token another core pushed or popped since the fork is on that core's
   engines, not this one's: it holds nothing here. */
int32_t {h}_core(int32_t c) {{
    if (c < 0 || c >= {nc}) {{ cvl_sim_stats.error = 4; return 0; }}
    cvl_save(cvl_core);
    cvl_core = c;
    cvl_restore(c);
    if (!cvl_entered[c]) {{
        for (int e = 0; e < {ne}; ++e)
            if (cvl_f_time > cvl_ready[e]) cvl_ready[e] = cvl_f_time;
        cvl_entered[c] = 1;
    }}
    for (int q = 0; q < {nq}; ++q) {{
        for (int64_t n = cvl_f_pushes[q]; n < cvl_qpushes[q]; ++n)
            if (n >= cvl_qpushes[q] - {ring}) cvl_qtok[q][n % {ring}] = 0;
        for (int64_t n = cvl_f_pops[q]; n < cvl_qpops[q]; ++n)
            if (n >= cvl_qpops[q] - {ring}) cvl_qpop[q][n % {ring}] = 0;
        cvl_f_pushes[q] = cvl_qpushes[q];
        cvl_f_pops[q] = cvl_qpops[q];
    }}
    return 0;
}}
/* the barrier: every core's engines wait for the last of all */
int32_t {h}_join(void) {{
    int64_t t = 0;
    cvl_save(cvl_core);
    for (int c = 0; c < {nc}; ++c)
        for (int e = 0; e < {ne}; ++e) {{
            if (cvl_c_clock[c][e] > t) t = cvl_c_clock[c][e];
            if (cvl_c_ready[c][e] > t) t = cvl_c_ready[c][e];
            if (cvl_c_done[c][e] > t) t = cvl_c_done[c][e];
        }}
    for (int c = 0; c < {nc}; ++c)
        for (int e = 0; e < {ne}; ++e) cvl_c_ready[c][e] = t;
    cvl_core = 0;
    cvl_restore(0);
    return 0;
}}""")
    else:
        out.append("""static void cvl_cores_reset(void) {
    memset(cvl_cal_n, 0, sizeof cvl_cal_n); memset(cvl_busy_core, 0, sizeof cvl_busy_core);
    cvl_link_stalls = 0;
}""")
    return "\n".join(out)


def core_memory_maps(acc, text_of, specs, plans, warns, used: int) -> str:
    """The memory map of a multi-core function: the shared memories once, then one
    section per core used (every core runs the same program, so each core's
    per-core memories hold the same layout at the same addresses, in its own copy).
    ``text_of(specs, plans, warns)`` renders one section."""
    shared = [m for m in specs if acc.cores.is_shared(m.scope)]
    own = [m for m in specs if not acc.cores.is_shared(m.scope)]
    parts = [f"shared ({acc.cores.count} cores read them):",
             text_of(shared, plans, []) if shared else "  (none)"]
    for c in range(used):
        parts += [f"core {c}:", text_of(own, plans, [])]
    parts += [f"warning: {w}" for w in warns]
    return "\n".join(parts)


def core_section(text: str, core: int) -> str:
    """One core's section of :func:`core_memory_maps`' text (with the shared part).

    Example::

        >>> core_section("shared (2 cores read them):\\n  (none)\\ncore 0:\\nx\\ncore 1:\\ny", 1)
        'shared (2 cores read them):\\n  (none)\\ncore 1:\\ny'
    """
    lines, out, keep = text.split("\n"), [], True
    for line in lines:
        if re.fullmatch(r"core \d+:", line):
            keep = line == f"core {core}:"
        elif line.startswith("warning: "):
            keep = True
        if keep:
            out.append(line)
    if f"core {core}:" not in out:
        have = [int(ln[5:-1]) for ln in lines if re.fullmatch(r"core \d+:", ln)]
        raise AccelLoweringError(f"memory_map(core={core}): expected one of the cores this "
                                 f"function runs on, {have}; found {core!r}")
    return "\n".join(out)


__all__ = ["CORE_LOOP", "Cores", "bind_cores", "check_placement", "core_memory_maps",
           "core_section", "cores_c", "cores_header", "link_of"]
