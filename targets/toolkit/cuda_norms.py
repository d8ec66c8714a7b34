"""Fused row reductions for the ``cuda`` target, written as tensor IR: row softmax,
layernorm and RMSNorm, each reading every element once from device memory.

Each function returns a :class:`~cuvil_tir.PrimFunc` (TVMScript-style IR with loops
bound to ``blockIdx``/``threadIdx``), built for ``Target("cuda")`` like any scheduled
function; nothing is a string pasted by a printer: the warp reductions are the
registry's ``warp_max``/``warp_sum``, the barriers are inserted by the barrier pass,
the 16-byte moves are vector loads and stores (``T.Ramp`` of 4 float32) that the
codegen prints as ``float4`` accesses, and the interpreter checks every kernel
numerically and for races.

How a row is reduced depends on its length ``n`` (float32):

* **rows that fit in one block's registers** (``n`` up to :data:`ROW_LIMIT`): one
  block per row; each thread loads its ``4 * V`` elements with ``V`` 16-byte loads
  (consecutive threads read consecutive 16 bytes: coalesced) into registers, the
  block reduces them (a warp butterfly, then the warps' results through shared
  memory, every warp combining them itself), and the output is written from the same
  registers: one read and one write per element;
* **long rows** (``n`` above it, e.g. 16 x 262144, or fewer rows than the GPU has
  multiprocessors to fill: :func:`splits`): the row is split into chunks of
  :data:`CHUNK` elements, one block each, in two kernels: the first writes each
  chunk's statistics (softmax: the online pair (max, sum of exp(x - max)); norms:
  (mean, sum of squared deviations), Chan's parallel form) to a small temporary; the
  second combines its row's statistics in every warp (a warp reduction over the
  chunks: no cliff however long the row) and normalises its chunk, which it reads
  again (the chunk was read a moment before: from L2 on GPUs whose L2 holds the rows
  in flight).

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> f = softmax(4, 1024)              # 64 threads, 4 floats each: two warps
    >>> x = np.random.default_rng(0).standard_normal((4, 1024)).astype("float32")
    >>> y = np.zeros_like(x)
    >>> T.interpret(T.lower(f, "cuda"), x, y, check_races=True)
    >>> e = np.exp(x - x.max(1, keepdims=True))
    >>> bool(np.allclose(y, e / e.sum(1, keepdims=True), atol=1e-6))
    True
"""

from __future__ import annotations

from cuvil_tir.errors import ScheduleError
from cuvil_tir.ops.cluster import CLUSTER_KEY, PORTABLE_CLUSTER_SIZE
from cuvil_tir.parser import parse

#: the longest row one block keeps in registers (1024 threads x 32 floats)
ROW_LIMIT = 32768
#: elements per block of a long row (256 threads x 4 x 16-byte loads)
CHUNK = 4096
#: the elements of one 16-byte vector of float32
VEC = 4
#: fewer rows than this leave SMs idle with one block per row: long enough rows are
#: then split into chunks too (twice the 132 SMs of an H100/H200)
FEW_ROWS = 264


def splits(rows: int, n: int, row_limit: int = ROW_LIMIT, chunk: int = CHUNK) -> bool:
    """Whether rows of ``n`` are reduced in chunks (two kernels) rather than one block
    per row: rows too long for one block's registers, or too few rows to fill the GPU
    (and long enough for at least four chunks).

    Example::

        >>> splits(4096, 4096), splits(16, 262144), splits(16, 4096)
        (False, True, False)
    """
    return n > row_limit or (rows < FEW_ROWS and n >= 4 * chunk and n % chunk == 0)


def _shape(n: int) -> tuple:
    """``(threads, vectors per thread)`` for a row of ``n`` float32 kept in registers."""
    if n % (32 * VEC):
        raise ScheduleError(f"fused row reductions: the row length {n} must be a multiple "
                            f"of {32 * VEC} (a warp of 16-byte loads); pad the rows")
    threads = max(32, min(1024, n // (VEC * 4)))
    while n % (threads * VEC):
        threads //= 2
    return threads, n // (threads * VEC)


_WARP = 'T.call_intrin("float32", "{op}", {x}, 32)'
_NEG_INF = 'T.float32("-inf")'


def _block_reduce(op: str, acc: str, part: str, warps: int, ident: str) -> str:
    """Statements combining ``acc[0]`` over the block into ``acc[0]`` in every
    thread: a warp butterfly, each warp's result into ``part``, every warp combining
    ``part`` itself (the barrier pass orders ``part``)."""
    first = _WARP.format(op=op, x=f"{acc}[0]")
    lane = f"T.if_then_else(tx % 32 < {warps}, {part}[tx % 32], {ident})"
    return (f"{acc}[0] = {first}\n"
            f"if tx % 32 == 0:\n    {part}[tx // 32] = {acc}[0]\n"
            f"{acc}[0] = {_WARP.format(op=op, x=lane)}\n")


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "".join(pad + line + "\n" if line else "\n" for line in text.splitlines())


def _load(threads: int, v: int, src: str, base: str, at: str = "") -> str:
    # row ``base`` of ``src`` from column ``at`` on (a text ending in " + ")
    return (f"for v in T.unroll({v}):\n"
            f"    x[T.Ramp(v * 4, 1, 4)] = {src}[{base}, T.Ramp({at}(v * {threads} + tx) * 4, "
            "1, 4)]\n")


def _kernel(name: str, params: str, grid: str, threads: int, v: int, body: str,
            weights: bool = False) -> str:
    # x: the thread's elements; acc: its statistics; w: 16 bytes of each weight
    # vector; part: one value per warp
    depth = 4 * (grid.count("\n") + 1)
    inner = (f"for tx in T.thread_binding({threads}, thread=\"threadIdx.x\"):\n"
             f"    with T.allocate(({v * VEC},), \"float32\", scope=\"local\") as x:\n"
             f"        with T.allocate((2,), \"float32\", scope=\"local\") as acc:\n")
    nest = 12
    if "part[" in body:     # a kernel that reduces across warps (nvcc refuses unused ones)
        inner += f"{' ' * nest}with T.allocate((32,), \"float32\", scope=\"shared\") as part:\n"
        nest += 4
    if "stats[" in body:    # a block's statistics, read by its cluster (_cluster_rows)
        inner += f"{' ' * nest}with T.allocate((2,), \"float32\", scope=\"shared\") as stats:\n"
        nest += 4
    if weights:
        inner += f"{' ' * nest}with T.allocate((8,), \"float32\", scope=\"local\") as w:\n"
        nest += 4
    inner += _indent(body, nest)
    return f"def {name}({params}):\n{grid}" + _indent(inner, depth)


def _row_grid(rows: int) -> str:
    return f"    for row in T.thread_binding({rows}, thread=\"blockIdx.x\"):\n"


def _chunk_grid(rows: int, chunks: int) -> str:
    return (f"    for row in T.thread_binding({rows}, thread=\"blockIdx.y\"):\n"
            f"        for ch in T.thread_binding({chunks}, thread=\"blockIdx.x\"):\n")


def _sum_all(threads: int, v: int, expr: str) -> str:
    return (f"acc[0] = T.float32(0)\n"
            f"for e in T.unroll({v * VEC}):\n    acc[0] = acc[0] + {expr}\n"
            + _block_reduce("warp_sum", "acc", "part", threads // 32, "T.float32(0)"))


def _max_all(threads: int, v: int) -> str:
    return (f"acc[0] = x[0]\n"
            f"for e in T.unroll({v * VEC}):\n    acc[0] = T.max(acc[0], x[e])\n"
            + _block_reduce("warp_max", "acc", "part", threads // 32, _NEG_INF))


def _softmax_stats(threads: int, v: int) -> str:
    """acc[1] = the max, acc[0] = the sum of exp(x - max); x becomes exp(x - max)."""
    return (_max_all(threads, v) + "acc[1] = acc[0]\n"
            + f"for e in T.unroll({v * VEC}):\n    x[e] = T.exp(x[e] - acc[1])\n"
            + _sum_all(threads, v, "x[e]"))


def softmax(rows: int, n: int, name: str = "softmax", row_limit: int = ROW_LIMIT,
            chunk: int = CHUNK, arch: str = "sm_80", cluster: int | None = None):
    """``Y = softmax(X, axis=1)`` for float32 ``X`` of shape ``(rows, n)`` (module doc;
    ``row_limit`` and ``chunk`` as :data:`ROW_LIMIT` and :data:`CHUNK`; on ``arch``
    sm_90+ a long row is one kernel over a cluster of :func:`cluster_blocks` blocks,
    or of ``cluster`` blocks when given, 0: the two kernels).

    Example::

        >>> [p.name for p in softmax(2, 128).params]
        ['X', 'Y']
    """
    params = f'X: T.Buffer(({rows}, {n}), "float32"), Y: T.Buffer(({rows}, {n}), "float32")'
    if not cluster and not splits(rows, n, row_limit, chunk):
        threads, v = _shape(n)
        body = (_load(threads, v, "X", "row") + _softmax_stats(threads, v)
                + "acc[0] = T.float32(1) / acc[0]\n"
                + _store(threads, v, "Y", "row", "x[T.Ramp(v * 4, 1, 4)] * "
                                                  "T.Broadcast(acc[0], 4)"))
        return parse(_kernel(name, params, _row_grid(rows), threads, v, body))
    return _split_rows(name, params, rows, n, "softmax", (row_limit, chunk, arch, cluster))


def _store(threads: int, v: int, dst: str, base: str, value: str, at: str = "",
           weights: tuple = ()) -> str:
    """Each thread's results, 16 bytes at a time: computed into its registers, then
    one vector copy (a ``float4`` store); the weight vectors ``weights`` of the
    16 bytes are first copied into ``w`` (``float4`` loads)."""
    col = f"{at}(v * {threads} + tx) * 4"
    wl = "".join(f"    w[T.Ramp({4 * k}, 1, 4)] = {g}[T.Ramp({col}, 1, 4)]\n"
                 for k, g in enumerate(weights))
    return (f"for v in T.unroll({v}):\n{wl}"
            f"    x[T.Ramp(v * 4, 1, 4)] = {value}\n"
            f"    {dst}[{base}, T.Ramp({col}, 1, 4)] = x[T.Ramp(v * 4, 1, 4)]\n")


def _norm_stats(threads: int, v: int, n: int) -> str:
    """acc[1] = the mean, acc[0] = the sum of squared deviations from it."""
    return (_sum_all(threads, v, "x[e]") + f"acc[1] = acc[0] / T.float32({n})\n"
            + _sum_all(threads, v, "(x[e] - acc[1]) * (x[e] - acc[1])"))


def layernorm(rows: int, n: int, eps: float = 1e-5, name: str = "layernorm",
              row_limit: int = ROW_LIMIT, chunk: int = CHUNK, arch: str = "sm_80",
              cluster: int | None = None):
    """``Y = (X - mean) / sqrt(var + eps) * G + B`` over each row of float32 ``X``
    ``(rows, n)``, ``G`` and ``B`` of shape ``(n,)`` (module doc; the variance is the
    mean of squared deviations from the mean, computed from registers; ``arch`` and
    ``cluster`` as for :func:`softmax`).

    Example::

        >>> [p.name for p in layernorm(2, 128).params]
        ['X', 'G', 'B', 'Y']
    """
    params = (f'X: T.Buffer(({rows}, {n}), "float32"), G: T.Buffer(({n},), "float32"), '
              f'B: T.Buffer(({n},), "float32"), Y: T.Buffer(({rows}, {n}), "float32")')
    # acc[1]: the mean, acc[0]: 1 / the standard deviation
    out = ("(x[T.Ramp(v * 4, 1, 4)] - T.Broadcast(acc[1], 4)) * T.Broadcast(acc[0], 4) "
           "* w[T.Ramp(0, 1, 4)] + w[T.Ramp(4, 1, 4)]")
    if not cluster and not splits(rows, n, row_limit, chunk):
        threads, v = _shape(n)
        body = (_load(threads, v, "X", "row") + _norm_stats(threads, v, n)
                + f"acc[0] = T.rsqrt(acc[0] / T.float32({n}) + T.float32({eps!r}))\n"
                + _store(threads, v, "Y", "row", out, weights=("G", "B")))
        return parse(_kernel(name, params, _row_grid(rows), threads, v, body, True))
    return _split_rows(name, params, rows, n, "layernorm", (row_limit, chunk, arch, cluster),
                       eps, out, ("G", "B"))


def rmsnorm(rows: int, n: int, eps: float = 1e-6, name: str = "rmsnorm",
            row_limit: int = ROW_LIMIT, chunk: int = CHUNK, arch: str = "sm_80",
            cluster: int | None = None):
    """``Y = X / sqrt(mean(X**2) + eps) * G`` over each row of float32 ``X``
    ``(rows, n)``, ``G`` of shape ``(n,)`` (module doc; ``arch`` and ``cluster`` as
    for :func:`softmax`).

    Example::

        >>> [p.name for p in rmsnorm(2, 128).params]
        ['X', 'G', 'Y']
    """
    params = (f'X: T.Buffer(({rows}, {n}), "float32"), G: T.Buffer(({n},), "float32"), '
              f'Y: T.Buffer(({rows}, {n}), "float32")')
    out = "x[T.Ramp(v * 4, 1, 4)] * T.Broadcast(acc[0], 4) * w[T.Ramp(0, 1, 4)]"
    if not cluster and not splits(rows, n, row_limit, chunk):
        threads, v = _shape(n)
        body = (_load(threads, v, "X", "row") + _sum_all(threads, v, "x[e] * x[e]")
                + f"acc[0] = T.rsqrt(acc[0] / T.float32({n}) + T.float32({eps!r}))\n"
                + _store(threads, v, "Y", "row", out, weights=("G",)))
        return parse(_kernel(name, params, _row_grid(rows), threads, v, body, True))
    return _split_rows(name, params, rows, n, "rmsnorm", (row_limit, chunk, arch, cluster),
                       eps, out, ("G",))


def _split_rows(name, params, rows, n, kind, how, eps=0.0, out="", weights=()):
    """A row over several blocks: one kernel over a cluster where ``how`` = (row
    limit, chunk, arch, cluster) gives one, else the two kernels."""
    row_limit, chunk, arch, cluster = how
    blocks = cluster_blocks(rows, n, arch, row_limit, chunk) if cluster is None else cluster
    if blocks:
        return _cluster_rows(name, params, rows, n, kind, blocks, eps, out, weights)
    return _long_rows(name, params, rows, n, kind, chunk, eps, out, weights)


def _chunk_stats(kind: str, threads: int, v: int, chunk: int) -> str:
    """The statistics of a block's chunk, then ``(first, second)`` published by its
    thread 0: softmax (max, sum of exp); layernorm (mean, squared deviations); rmsnorm
    (sum of squares, 0)."""
    if kind == "softmax":
        return _softmax_stats(threads, v)
    if kind == "layernorm":
        return _norm_stats(threads, v, chunk)
    return _sum_all(threads, v, "x[e] * x[e]") + "acc[1] = T.float32(0)\n"


def _publish(kind: str, dst: str) -> str:
    first, second = ("acc[1]", "acc[0]") if kind != "rmsnorm" else ("acc[0]", "acc[1]")
    return ("if tx == 0:\n"
            f"    {dst.format(0)} = {first}\n"
            f"    {dst.format(1)} = {second}\n")


def _long_rows(name, params, rows, n, kind, chunk, eps=0.0, out="", weights=()):
    """The two kernels of a long row (module doc) in one function: statistics per
    chunk into the temporary ``P`` (host-allocated), then combine and normalise."""
    if n % chunk:
        raise ScheduleError(f"fused row reductions: a row of {n} is split into chunks of "
                            f"{chunk} (one block each), but {n} is not a multiple of {chunk}")
    chunks = n // chunk
    threads, v = _shape(chunk)
    base = f"ch * {chunk} + "
    load = _load(threads, v, "X", "row", base)
    # P[row, ch]: the chunk's statistics (_publish)
    first = _kernel(f"{name}_stats", "", _chunk_grid(rows, chunks), threads, v,
                    load + _chunk_stats(kind, threads, v, chunk)
                    + _publish(kind, "P[row, ch, {}]"))
    combine = _combine(kind, chunks, n, eps, chunk, "P[row, {c}, {k}]")
    if kind == "softmax":
        # the combine leaves acc[1] = the row max, acc[0] = the row's sum
        final = combine + "acc[0] = T.float32(1) / acc[0]\n" + _store(
            threads, v, "Y", "row", "T.exp(x[T.Ramp(v * 4, 1, 4)] - T.Broadcast(acc[1], 4)) "
                                    "* T.Broadcast(acc[0], 4)", base)
    else:
        final = combine + _store(threads, v, "Y", "row", out, base, weights)
    second = _kernel(f"{name}_apply", "", _chunk_grid(rows, chunks), threads, v,
                     load + final, bool(weights))
    body = (f"def {name}({params}):\n"
            f"    with T.allocate(({rows}, {chunks}, 2), \"float32\", scope=\"global\") as P:\n"
            + _indent(_strip_def(first), 8) + _indent(_strip_def(second), 8))
    return parse(body)


_CLUSTER = 'T.evaluate(T.call_intrin("int32", "cluster_{}"))\n'


def cluster_blocks(rows: int, n: int, arch: str = "sm_80", row_limit: int = ROW_LIMIT,
                   chunk: int = CHUNK) -> int:
    """The blocks of the thread-block cluster reducing one row of ``n`` in one kernel
    on ``arch`` (:func:`_cluster_rows`), or 0 for the two-kernel path: clusters need
    sm_90+, and rows that :func:`splits` would split, whose share per block (of at
    most :data:`PORTABLE_CLUSTER_SIZE`) fits one block's registers.

    Example::

        >>> cluster_blocks(16, 262144, "sm_90"), cluster_blocks(16, 262144, "sm_80")
        (8, 0)
        >>> cluster_blocks(4096, 4096, "sm_90"), cluster_blocks(2, 1 << 20, "sm_90a")
        (0, 0)
    """
    try:
        major = int(str(arch).removeprefix("sm_").rstrip("a")) // 10
    except ValueError:
        return 0
    if major < 9 or not splits(rows, n, row_limit, chunk):
        return 0
    for c in (PORTABLE_CLUSTER_SIZE, 4, 2):
        if n % (c * 32 * VEC) == 0 and n // c <= row_limit:
            return c
    return 0


def _cluster_rows(name, params, rows, n, kind, blocks, eps=0.0, out="", weights=()):
    """One kernel for a long row: a cluster of ``blocks`` blocks per row, each holding
    its share in registers (one read), publishing its statistics in shared memory;
    after a cluster barrier every warp combines the blocks' statistics through DSMEM,
    and each block normalises its share from registers (one write).  Each block
    arrives on the cluster barrier once it has read its peers and waits on it at its
    end: no block exits while a peer may still read its statistics, and the wait
    costs nothing more than the slowest block of the cluster."""
    if not 1 <= blocks <= PORTABLE_CLUSTER_SIZE or n % (blocks * 32 * VEC):
        raise ScheduleError(f"fused row reductions: a cluster of {blocks} blocks per row "
                            f"of {n}: expected 1 to {PORTABLE_CLUSTER_SIZE} blocks, each "
                            f"a multiple of {32 * VEC} elements; pick a cluster size "
                            f"dividing {n // (32 * VEC)}")
    part = n // blocks
    threads, v = _shape(part)
    base = f"ch * {part} + "
    grid = (f"    for row in T.thread_binding({rows}, thread=\"blockIdx.y\"):\n"
            f"        for ch in T.thread_binding({blocks}, thread=\"blockIdx.x\", "
            f"annotations={{\"{CLUSTER_KEY}\": {blocks}}}):\n")
    body = (_load(threads, v, "X", "row", base) + _chunk_stats(kind, threads, v, part)
            + _publish(kind, "stats[{}]") + _CLUSTER.format("sync")
            + _combine(kind, blocks, n, eps, part, "T.dsmem_load(stats[{k}], {c})"))
    if kind == "softmax":
        # x holds exp(x - the block's max): rescaled to the row's max (acc[1]) and
        # divided by the row's sum (acc[0]) with one exp per thread
        body += ("acc[0] = T.exp(stats[0] - acc[1]) / acc[0]\n" + _CLUSTER.format("arrive")
                 + _store(threads, v, "Y", "row", "x[T.Ramp(v * 4, 1, 4)] * "
                                                  "T.Broadcast(acc[0], 4)", base))
    else:
        body += _CLUSTER.format("arrive") + _store(threads, v, "Y", "row", out, base, weights)
    body += _CLUSTER.format("wait")
    return parse(_kernel(name, params, grid, threads, v, body, bool(weights)))


def _strip_def(kernel: str) -> str:
    return "\n".join(line[4:] for line in kernel.splitlines()[1:]) + "\n"


def _combine(kind: str, chunks: int, n: int, eps: float, chunk: int, stat: str) -> str:
    """Every warp combines the row's chunk statistics (``stat`` formats statistic
    ``k`` of chunk ``c``): lane ``l`` takes chunks ``l, l + 32, ...`` (online softmax /
    Chan's parallel variance), then the warp."""
    lanes = []
    for k in range(-(-chunks // 32)):
        c = f"tx % 32 + {32 * k}"
        valid = f"{c} < {chunks}"
        lanes.append((c, valid))
    if kind == "softmax":
        # lane max, then each lane's sums rescaled to the warp max
        text = "acc[1] = " + _NEG_INF + "\n"
        for c, valid in lanes:
            text += (f"acc[1] = T.max(acc[1], T.if_then_else({valid}, "
                     f"{stat.format(c=c, k=0)}, {_NEG_INF}))\n")
        text += f"acc[1] = {_WARP.format(op='warp_max', x='acc[1]')}\nacc[0] = T.float32(0)\n"
        for c, valid in lanes:
            text += (f"acc[0] = acc[0] + T.if_then_else({valid}, {stat.format(c=c, k=1)} * "
                     f"T.exp({stat.format(c=c, k=0)} - acc[1]), T.float32(0))\n")
        return text + f"acc[0] = {_WARP.format(op='warp_sum', x='acc[0]')}\n"
    if kind == "rmsnorm":
        text = "acc[0] = T.float32(0)\n"
        for c, valid in lanes:
            text += (f"acc[0] = acc[0] + T.if_then_else({valid}, {stat.format(c=c, k=0)}, "
                     "T.float32(0))\n")
        return (text + f"acc[0] = {_WARP.format(op='warp_sum', x='acc[0]')}\n"
                f"acc[0] = T.rsqrt(acc[0] / T.float32({n}) + T.float32({eps!r}))\n")
    # layernorm: the mean of the chunks' means (equal counts), then Chan's sum of the
    # squared deviations
    tail = (f"acc[0] = {_WARP.format(op='warp_sum', x='acc[0]')}\n"
            f"acc[0] = T.rsqrt(acc[0] / T.float32({n}) + T.float32({eps!r}))\n")
    if len(lanes) == 1:
        # one chunk per lane: its mean stays in acc[0] (each statistic read once, a
        # DSMEM load in a cluster)
        (c, valid), = lanes
        return (f"acc[0] = T.if_then_else({valid}, {stat.format(c=c, k=0)}, T.float32(0))\n"
                f"acc[1] = {_WARP.format(op='warp_sum', x='acc[0]')} / T.float32({chunks})\n"
                f"acc[0] = T.if_then_else({valid}, {stat.format(c=c, k=1)} + "
                f"T.float32({chunk}) * (acc[0] - acc[1]) * (acc[0] - acc[1]), T.float32(0))\n"
                + tail)
    text = "acc[1] = T.float32(0)\n"
    for c, valid in lanes:
        text += (f"acc[1] = acc[1] + T.if_then_else({valid}, {stat.format(c=c, k=0)}, "
                 "T.float32(0))\n")
    text += (f"acc[1] = {_WARP.format(op='warp_sum', x='acc[1]')} / T.float32({chunks})\n"
             "acc[0] = T.float32(0)\n")
    for c, valid in lanes:
        d = f"({stat.format(c=c, k=0)} - acc[1])"
        text += (f"acc[0] = acc[0] + T.if_then_else({valid}, {stat.format(c=c, k=1)} + "
                 f"T.float32({chunk}) * {d} * {d}, T.float32(0))\n")
    return text + tail


__all__ = ["CHUNK", "FEW_ROWS", "ROW_LIMIT", "cluster_blocks", "layernorm", "rmsnorm",
           "softmax", "splits"]
