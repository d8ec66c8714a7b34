"""A fixed-length feature vector of a scheduled function, for the cost model: read from
the block-level IR the schedule made (loops with their kinds and extents, blocks with
their iterator bindings and access regions), never lowered, so it costs milliseconds.

For the *dominant* block (the one doing the most arithmetic) it describes the loop
nest: iterations and arithmetic, the parallel extent (and how evenly it spreads over
the machine's cores), the vector loop (in lanes of the machine), unrolling, the
register tile of a ``local`` accumulator against the vector registers, the stride of
the innermost loop in each access (invariant / contiguous / strided), the bytes the
innermost 1..6 loops touch (and how many of those levels fit L1 and L2), the
arithmetic intensity there and against the bytes fetched from beyond L2
(:mod:`.traffic`), the reduction loops' position; for the whole function the
share of work in other blocks (packing, copies) and the bytes of cached buffers.
Counts enter as ``log2(1 + x)`` so the model sees ratios; sizes are taken relative to
the :class:`~cuvil_tir.target.Machine`, so records of one task teach another.  The
last is :func:`.prior.analytic_score`, a roofline estimate made of the others.

A loop's stride in an access is the slope of each region index (in block iterators)
through the bindings of the iterators (in loop variables), :func:`_slope`.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.target import Machine
    >>> A = T.placeholder((64,), name="A")
    >>> f = T.create_prim_func([A, T.compute((64,), lambda i: A[i] * 2.0, name="B")])
    >>> v = features(f, Machine(256, 16, 32768, 1 << 20, 2))
    >>> len(v) == len(NAMES), v[NAMES.index("iterations")]
    (True, 6.022367813028454)
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.errors import CuvilError
from cuvil_tir.expr import Add, BufferLoad, Call, Div, FloorDiv, FloorMod, Max, Min, Mul, \
    Sub, Var
from cuvil_tir.stmt import Block, BlockRealize, For
from cuvil_tir.target import SCALAR_MACHINE, Machine
from cuvil_tir.visitor import post_order_visit
from .prior import _log, analytic_score
from .space import machine_of
from .traffic import beyond_l2

#: inner loop levels whose footprints are described
LEVELS = 6
#: what each position of the vector means
NAMES = ("iterations", "flops", "parallel", "parallel_per_core", "parallel_balanced",
         "vector_lanes", "vector_innermost", "unroll", "register_tile",
         "register_pressure", "read_invariant", "read_contiguous", "read_strided",
         "write_contiguous", *(f"bytes_l{k}" for k in range(1, LEVELS + 1)),
         "levels_in_l1", "levels_in_l2", "intensity_inner", "intensity_mid",
         "reduce_inner_extent", "spatial_inside_reduce", "depth",
         *(f"{a}_{b}" for a in ("kernel", "reduce", "reduce_up1", "reduce_up2")
           for b in ("bytes", "in_l1", "in_l2")),
         "accumulator_vectors", "tile_rows", "work_per_task", "expression_lanes",
         "blocks", "other_work", "cached_bytes", "local_scope", "intensity_beyond_l2",
         "analytic")

_ARITH = (Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max, Call)


def _extent(loop) -> int:
    v = getattr(loop.extent, "value", None)
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


def _nests(stmt, loops, out) -> None:
    """(realize, enclosing loops outermost first) of every leaf block under ``stmt``."""
    if isinstance(stmt, For):
        _nests(stmt.body, loops + (stmt,), out)
    elif isinstance(stmt, BlockRealize):
        inner: list = []
        _nests(stmt.block.body, (), inner)
        if inner:   # a block holding blocks: its loops are the outer part of theirs
            out.extend((r, loops + below) for r, below in inner)
        elif stmt.block.name != "root":
            out.append((stmt, loops))
    elif isinstance(stmt, Block):
        _nests(stmt.body, loops, out)
    else:
        for name in ("body", "then_case", "else_case", "seq", "block"):
            child = getattr(stmt, name, None)
            for c in (child if isinstance(child, tuple) else (child,)):
                if c is not None and hasattr(c, "__dataclass_fields__"):
                    _nests(c, loops, out)


def _slope(e, d: dict, span: int = 1) -> float:
    """How much integer index ``e`` moves when one loop of ``span`` iterations advances
    by one, given how much each variable moves (``d``): exact for affine indices;
    through ``//`` and ``%`` by a constant (a packed layout's ``j // 16``, ``j % 16``)
    the quotient stays put and the remainder follows while the loop's whole run stays
    within one period, else the average slope; :data:`FAR` for anything else that uses
    a moving variable."""
    if isinstance(e, Var):
        return d.get(e, 0.0)
    if isinstance(e, (Add, Sub)):
        a, b = _slope(e.a, d, span), _slope(e.b, d, span)
        return a + b if isinstance(e, Add) else a - b
    c = getattr(getattr(e, "b", None), "value", None)
    if isinstance(e, Mul):
        ca = getattr(e.a, "value", None)
        if isinstance(c, int):
            return _slope(e.a, d, span) * c
        if isinstance(ca, int):
            return _slope(e.b, d, span) * ca
    elif isinstance(e, FloorDiv) and isinstance(c, int) and c > 0:
        s = _slope(e.a, d, span)
        return 0.0 if abs(s) * (span - 1) < c else s / c
    elif isinstance(e, FloorMod) and isinstance(c, int) and c > 0:
        s = _slope(e.a, d, span)
        return s if abs(s) * (span - 1) < c or s % c else 0.0
    if hasattr(e, "value"):
        return 0.0
    return FAR if any(d.get(v) for v in _vars(e)) else 0.0


#: the stride given to a loop that reaches an index in a way :func:`_slope` cannot follow
FAR = float(1 << 20)


def _strides(region, realize, loops) -> dict:
    """Loop var -> the (absolute) stride of one loop step in the flattened, row-major
    buffer of one access."""
    shape = [getattr(s, "value", None) for s in region.buffer.shape]
    row = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        row[k] = row[k + 1] * (shape[k + 1] if isinstance(shape[k + 1], int) else 1)
    out: dict = {}
    for lp in loops:
        moves = {lp.loop_var: 1.0}
        span = _extent(lp)
        d = {iv.var: _slope(val, moves, span) for iv, val in zip(realize.block.iter_vars,
                                                                  realize.iter_values)}
        out[lp.loop_var] = sum(abs(_slope(rg.min, d, span)) * row[k]
                               for k, rg in enumerate(region.region))
    return out


def _vars(e) -> list:
    found: list = []
    post_order_visit(e, lambda x: found.append(x) if isinstance(x, Var) else None)
    return found


def _ops(block) -> int:
    count = [0]

    def visit(e):
        if not isinstance(e, _ARITH):
            return
        n = D.lanes(str(e.dtype))   # a tensorized step computes on whole vectors
        if not D.is_integer(str(e.dtype)) or n > 1:
            count[0] += n
        elif isinstance(e, (Add, Mul)) and _has_load(e):
            count[0] += 1   # integer arithmetic on data (an int8 GEMM), not on indices
    post_order_visit(block.body, visit)
    return max(1, count[0])


def _expression_lanes(block) -> int:
    widest = [1]

    def visit(e):
        dt = getattr(e, "dtype", None)
        if dt is not None and not isinstance(e, Var):
            try:
                widest[0] = max(widest[0], D.lanes(str(dt)))
            except CuvilError:
                pass   # not a value type (a handle): no lanes
    post_order_visit(block.body, visit)
    return widest[0]


def _has_load(e) -> bool:
    return any(isinstance(x, BufferLoad) for x in (getattr(e, "a", None),
                                                    getattr(e, "b", None)))


def _width(buf) -> int:
    return max(1, D.bits(D.element(str(buf.dtype))) // 8)


def _bytes(strides, loops) -> int:
    """Bytes the accesses touch while ``loops`` run (each access: the product of the
    extents of the loops it moves with)."""
    total = 0
    for st, width, _ in strides:
        n = 1
        for lp in loops:
            if st.get(lp.loop_var, 0):
                n *= _extent(lp)
        total += n * width
    return total


def _block_vector(realize, loops, machine, cores) -> list:
    block = realize.block
    iters = 1
    par = unroll = 1
    vec = 0
    for lp in loops:
        iters *= _extent(lp)
        if lp.kind == "parallel":
            par *= _extent(lp)
        elif lp.kind == "unrolled":
            unroll *= _extent(lp)
        elif lp.kind == "vectorized":
            vec = _extent(lp)
    flops = iters * _ops(block)
    dtype = str(block.writes[0].buffer.dtype) if block.writes else "float32"
    lanes = machine.lanes(dtype)
    accesses = [(r, False) for r in block.reads] + [(w, True) for w in block.writes]
    strides = [(_strides(r, realize, loops), _width(r.buffer), w) for r, w in accesses]
    inner = loops[-1].loop_var if loops else None
    kinds = [0, 0, 0]
    write_contig = 0.0
    for st, _, is_write in strides:
        s = st.get(inner, 0) if inner is not None else 0
        if is_write:
            write_contig = 1.0 if s <= 1 else 0.0
        else:
            kinds[0 if s == 0 else 1 if s <= 1 else 2] += 1
    nreads = max(1, sum(kinds))
    levels = [_bytes(strides, loops[-k:] if k <= len(loops) else loops)
              for k in range(1, LEVELS + 1)]
    sub_iters = [1]
    for lp in reversed(loops):
        sub_iters.append(sub_iters[-1] * _extent(lp))
    ops = _ops(block)
    in_l1 = sum(1 for b in levels if b <= machine.l1d_bytes)
    in_l2 = sum(1 for b in levels if b <= machine.l2_bytes)
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "reduce"}
    red_loops = [n for n, lp in enumerate(loops) if any(
        _slope(val, {lp.loop_var: 1.0}) for iv, val in zip(block.iter_vars,
                                                           realize.iter_values)
        if iv.var in reduce_vars)]
    red_inner = _extent(loops[red_loops[-1]]) if red_loops else 1
    spatial_inside = len(loops) - 1 - red_loops[-1] if red_loops else 0
    local = block.writes and block.writes[0].buffer.scope == "local"
    tile = 1
    for lp in reversed(loops):
        if lp.kind not in ("unrolled", "vectorized"):
            break
        tile *= _extent(lp)
    regs = max(1, machine.vector_registers)
    mid = min(3, len(loops))
    # the working sets anchored on the reduction: the micro-kernel (from the innermost
    # reduction loop in), the whole reduction, and one and two loops above it -- what
    # L1 and L2 must hold, whatever the number of loops a candidate has
    r_in = red_loops[-1] if red_loops else len(loops) - 1
    r_out = red_loops[0] if red_loops else 0
    anchored = []
    for start in (r_in, r_out, r_out - 1, r_out - 2):
        b = _bytes(strides, loops[max(0, start):])
        anchored += [_log(b), float(b <= machine.l1d_bytes), float(b <= machine.l2_bytes)]
    rows = 1
    for lp in reversed(loops):
        if lp.kind == "unrolled":
            rows *= _extent(lp)
        elif lp.kind != "vectorized":
            break
    return [_log(iters), _log(flops), _log(par), _log(par / cores),
            1.0 if par >= cores and par % cores == 0 else 0.0,
            vec / lanes, 1.0 if loops and loops[-1].kind == "vectorized" else 0.0,
            _log(unroll), _log(tile), tile / lanes / regs if local else 0.0,
            kinds[0] / nreads, kinds[1] / nreads, kinds[2] / nreads, write_contig,
            *[_log(b) for b in levels], float(in_l1), float(in_l2),
            _log(ops * sub_iters[1] / max(1, levels[0])),
            _log(ops * sub_iters[mid] / max(1, levels[mid - 1])),
            _log(red_inner), float(spatial_inside), float(len(loops)), *anchored,
            tile / lanes if local else 0.0, _log(rows),
            # the work of one parallel iteration (a small task's threads cost more than
            # they save) and the widest vector the body computes on (a tensorized
            # step's lanes: no vectorized loop shows them)
            _log(flops / par), _expression_lanes(block) / lanes], flops, bool(local), \
        _log(flops / max(1, beyond_l2([(st, w) for st, w, _ in strides],
                                      [(lp.loop_var, _extent(lp)) for lp in loops],
                                      machine.l2_bytes)))


def features(func_or_sch, machine=None) -> list:
    """The feature vector (see :data:`NAMES`) of a scheduled function or Schedule on
    ``machine`` (a :class:`~cuvil_tir.target.Machine` or a target; None: a scalar
    machine).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((4,), name="A")])
        >>> features(f) == [0.0] * len(NAMES)
        True
    """
    func = getattr(func_or_sch, "func", func_or_sch)
    if machine is None:
        machine = SCALAR_MACHINE
    elif not isinstance(machine, Machine):
        machine = machine_of(machine)
    cores = max(1, machine.cores)
    nests: list = []
    _nests(func.body, (), nests)
    if not nests:
        return [0.0] * len(NAMES)
    rows = [_block_vector(r, loops, machine, cores) for r, loops in nests]
    top = max(range(len(rows)), key=lambda k: rows[k][1])
    vec, work, local, intensity = rows[top]
    other = sum(r[1] for r in rows) - work
    cached = 0
    for r, _ in nests:
        for w in r.block.writes:
            if w.buffer.scope != "global" or w.buffer not in func.buffer_map.values():
                n = _width(w.buffer)
                for s in w.buffer.shape:
                    n *= getattr(s, "value", 1) or 1
                cached += n
    out = vec + [float(len(nests)), _log(other / max(1, work)), _log(cached),
                 1.0 if local else 0.0, intensity]
    out.append(analytic_score(dict(zip(NAMES, out)), machine))
    return [float(x) for x in out]


__all__ = ["LEVELS", "NAMES", "features"]
