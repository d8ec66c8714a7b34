"""Random schedule steps for the fuzzer: every primitive with random arguments, and the
sequences that found the defects of issue 25 (blockize with guards, decompose_reduction
after compute_at or after fuse + a non-dividing split, cache stages inside blockized
blocks, transform_layout of intermediate buffers).

A step is drawn from a ``random.Random`` and applied to a ``Schedule``; a refusal
(``ScheduleError``) is recorded by its class and code, and must leave the schedule as it
was.  :func:`random_steps` applies a few and returns what happened.

Example::

    >>> import random
    >>> import schedules as S
    >>> from tests.schedules.fuzz.programs import random_program
    >>> rng = random.Random(0)
    >>> sch = S.Schedule(random_program(rng).func)
    >>> log = random_steps(sch, rng, 3)
    >>> len(log) == 3 and all(outcome in ("ok", "refused") for _, outcome, _ in log)
    True
"""

from __future__ import annotations

import cuvil_tir as T
from cuvil_tir.analysis import tree
from schedules.errors import RegionContractError


class ContractBroken(Exception):
    """A step the schedule refused because the primitive's result broke the region
    contract (:class:`schedules.errors.RegionContractError`): a defect of the
    primitive, which the fuzzer reports, not a refusal that says what to change."""


def blocks(sch) -> list:
    """The names of the function's blocks (not the root)."""
    return [b.block.name for b in tree.blocks_under(sch.func.body)][1:]


def _reductions(sch) -> list:
    return [b.block.name for b in tree.blocks_under(sch.func.body)
            if any(iv.kind == "reduce" for iv in b.block.iter_vars)]


def _block(sch, rng, names=None):
    names = blocks(sch) if names is None else names
    return rng.choice(names) if names else None


def _loop(sch, rng, name):
    loops = sch.get_loops(name)
    return rng.choice(loops) if loops else None


def _factors(rng):
    f = rng.choice((1, 2, 3, 4, 5))
    return rng.choice(([None, f], [f, None], [None, f, rng.choice((1, 2))]))


def _split(sch, rng):
    name = _block(sch, rng)
    loop = name and _loop(sch, rng, name)
    if loop is not None:
        sch.split(loop, _factors(rng))


def _fuse(sch, rng):
    name = _block(sch, rng)
    loops = sch.get_loops(name) if name else []
    if len(loops) >= 2:
        k = rng.randrange(len(loops) - 1)
        sch.fuse(loops[k], loops[k + 1])


def _reorder(sch, rng):
    name = _block(sch, rng)
    loops = sch.get_loops(name) if name else []
    if len(loops) >= 2:
        picked = rng.sample(loops, 2)
        sch.reorder(*picked)


def _loop_kind(sch, rng):
    name = _block(sch, rng)
    loops = sch.get_loops(name) if name else []
    if loops:
        kind = rng.choice(("parallel", "vectorize", "unroll"))
        loop = loops[-1] if kind == "vectorize" and rng.random() < 0.7 else rng.choice(loops)
        getattr(sch, kind)(loop)


def _compute_at(sch, rng):
    names = blocks(sch)
    if len(names) < 2:
        return
    a, b = rng.sample(names, 2)
    loop = _loop(sch, rng, b)
    if loop is not None:
        prim = sch.compute_at if rng.random() < 0.5 else sch.reverse_compute_at
        prim(a, loop)


def _inline(sch, rng):
    name = _block(sch, rng)
    if name:
        (sch.compute_inline if rng.random() < 0.6 else sch.reverse_compute_inline)(name)


def _cache(sch, rng):
    name = _block(sch, rng)
    if not name:
        return
    blk = sch.get(name)
    scope = rng.choice(("global", "local"))
    if rng.random() < 0.5 and blk.reads:
        sch.cache_read(name, rng.randrange(len(blk.reads)), scope)
    elif blk.writes:
        sch.cache_write(name, rng.randrange(len(blk.writes)), scope)


def _decompose(sch, rng):
    name = _block(sch, rng, _reductions(sch))
    loop = name and _loop(sch, rng, name)
    if loop is not None:
        sch.decompose_reduction(name, loop)


def _rfactor(sch, rng):
    name = _block(sch, rng, _reductions(sch))
    loop = name and _loop(sch, rng, name)
    if loop is not None:
        sch.rfactor(loop, rng.choice((0, 0, -1)))


def _blockize(sch, rng):
    name = _block(sch, rng)
    loop = name and _loop(sch, rng, name)
    if loop is not None:
        sch.blockize(loop)


def _intermediates(sch):
    params = {id(p) for p in sch.func.params}
    out = []
    for name in blocks(sch):
        for k, r in enumerate(sch.get(name).writes):
            if id(r.buffer) not in params:
                out.append((name, k, r.buffer))
    return out


def _layout(sch, rng):
    found = _intermediates(sch)
    if not found:
        return
    name, k, buf = rng.choice(found)
    pad = 0 if "int" in buf.dtype else 0.0
    if buf.ndim == 2 and rng.random() < 0.4:
        sch.transform_layout(name, k, lambda a, b: (b, a))
        return
    c = rng.choice((2, 3))
    sch.transform_layout(name, k, lambda *rest, i: (*rest, i // c, i % c), pad_value=pad)


def _pad_einsum(sch, rng):
    name = _block(sch, rng, _reductions(sch))
    if name:
        sch.pad_einsum(name, [rng.choice((1, 2, 4)) for _ in sch.get(name).iter_vars])


def _storage(sch, rng):
    found = _intermediates(sch)
    if not found:
        return
    name, k, buf = rng.choice(found)
    if rng.random() < 0.5:
        sch.set_scope(name, k, rng.choice(("global", "local")))
    else:
        sch.storage_align(name, k, rng.randrange(buf.ndim), rng.choice((2, 4)),
                          rng.choice((0, 1)))


def _cuts(rng, extent=None):
    """One to three partition lengths, the rest left to the last part or not; where
    the loop's extent is known, mostly lengths that fit it (a misfit is refused)."""
    lengths = [rng.choice((1, 2, 3)) for _ in range(rng.choice((1, 1, 2, 3)))]
    if isinstance(extent, T.IntImm) and rng.random() < 0.8:
        while lengths and sum(lengths) >= extent.value:
            lengths.pop()
        lengths = lengths or [1]
    return lengths + [None] if rng.random() < 0.7 else lengths


def _partition(sch, rng):
    name = _block(sch, rng)
    loop = name and _loop(sch, rng, name)
    if loop is not None:
        sch.loop_partition(loop, _cuts(rng, sch.get(loop).extent))


def _reindex(sch, rng):
    name = _block(sch, rng)
    if name:
        blk = sch.get(name)
        kind = rng.choice(("read", "write"))
        regions = blk.reads if kind == "read" else blk.writes
        if regions:
            sch.reindex(name, (kind, rng.randrange(len(regions))))


def _unit_loop(sch, rng):
    name = _block(sch, rng)
    if name:
        sch.add_unit_loop(name)


# sequences ------------------------------------------------------------------------------

def _fuse_split_decompose(sch, rng):
    """fuse a spatial and a reduce loop, split the result unevenly, decompose above."""
    name = _block(sch, rng, _reductions(sch))
    loops = sch.get_loops(name) if name else []
    if len(loops) < 2:
        return
    k = rng.randrange(len(loops) - 1)
    fused = sch.fuse(loops[k], loops[k + 1])
    sch.split(fused, [None, rng.choice((3, 4, 5))])
    sch.decompose_reduction(name, rng.choice(sch.get_loops(name)))


def _compute_at_decompose(sch, rng):
    """compute a reduction at a consumer's loop, then decompose it there."""
    names = _reductions(sch)
    name = _block(sch, rng, names)
    if not name:
        return
    consumers = [b.name for b in sch.get_consumers(name)]
    if not consumers:
        return
    loop = _loop(sch, rng, rng.choice(consumers))
    if loop is None:
        return
    sch.compute_at(name, loop)
    sch.decompose_reduction(name, rng.choice(sch.get_loops(name)))


def _split_blockize(sch, rng):
    """split a loop unevenly (a guard), blockize below it, then stage or decompose
    inside the new block."""
    name = _block(sch, rng)
    loops = sch.get_loops(name) if name else []
    if not loops:
        return
    _, inner = sch.split(rng.choice(loops), [None, rng.choice((2, 3, 4))])
    sch.blockize(inner)
    then = rng.choice(("cache_read", "cache_write", "decompose", "nothing"))
    blk = sch.get(name)
    if then == "cache_read" and blk.reads:
        sch.cache_read(name, rng.randrange(len(blk.reads)), rng.choice(("global", "local")))
    elif then == "cache_write" and blk.writes:
        sch.cache_write(name, 0, rng.choice(("global", "local")))
    elif then == "decompose" and blk.init is not None and sch.get_loops(name):
        sch.decompose_reduction(name, rng.choice(sch.get_loops(name)))


def _partition_then(sch, rng):
    """partition a loop (after a fuse or a split of it, or not) into several parts,
    then stage, blockize or decompose inside one part, or move a producer or consumer
    of the partitioned block under it."""
    name = _block(sch, rng)
    loops = sch.get_loops(name) if name else []
    if not loops:
        return
    near = [b.name for b in sch.get_producers(name) + sch.get_consumers(name)]
    k = rng.randrange(len(loops))
    before = rng.choice(("nothing", "fuse", "split"))
    if before == "fuse" and k + 1 < len(loops):
        loop = sch.fuse(loops[k], loops[k + 1])
    elif before == "split":
        loop = rng.choice(sch.split(loops[k], [None, rng.choice((2, 3))]))
    else:
        loop = loops[k]
    part = rng.choice(sch.loop_partition(loop, _cuts(rng, sch.get(loop).extent)))
    names = [b.block.name for b in tree.blocks_under(sch.get(part)) if b.block.iter_vars]
    if names:
        _in_part(sch, rng, rng.choice(names), part, near)


def _in_part(sch, rng, name, loop, near):
    then = rng.choice(("cache_read", "cache_write", "move", "blockize", "decompose",
                       "split"))
    blk = sch.get(name)
    if then == "cache_read" and blk.reads:
        sch.cache_read(name, rng.randrange(len(blk.reads)), rng.choice(("global", "local")))
    elif then == "cache_write" and blk.writes:
        sch.cache_write(name, rng.randrange(len(blk.writes)),
                        rng.choice(("global", "local")))
    elif then == "move" and near:
        other = rng.choice(near)
        (sch.compute_at if rng.random() < 0.5 else sch.reverse_compute_at)(other, loop)
    elif then == "blockize":
        sch.blockize(loop)
    elif then == "decompose" and blk.init is not None:
        sch.decompose_reduction(name, loop)
    elif then == "split":
        sch.split(loop, [None, rng.choice((2, 3))])


STEPS = (("split", _split, 4), ("fuse", _fuse, 2), ("reorder", _reorder, 2),
         ("loop_kind", _loop_kind, 2), ("compute_at", _compute_at, 3),
         ("inline", _inline, 2), ("cache", _cache, 2), ("decompose", _decompose, 2),
         ("rfactor", _rfactor, 1), ("blockize", _blockize, 2), ("layout", _layout, 2),
         ("pad_einsum", _pad_einsum, 1), ("storage", _storage, 1),
         ("partition", _partition, 1), ("reindex", _reindex, 1),
         ("unit_loop", _unit_loop, 1),
         ("fuse_split_decompose", _fuse_split_decompose, 2),
         ("compute_at_decompose", _compute_at_decompose, 2),
         ("split_blockize", _split_blockize, 3),
         ("partition_then", _partition_then, 2))


#: the steps made of several primitives: those before a refused one stay applied
SEQUENCES = frozenset(("fuse_split_decompose", "compute_at_decompose", "split_blockize",
                       "partition_then"))


def random_step(sch, rng) -> tuple:
    """Apply one random step; ``(name, "ok" | "refused", error or None)``.  A refusal
    is any coded error (``T.CuvilError``) but a malformed node; a single primitive
    refused leaves the function unchanged (asserted).  Other exceptions propagate:
    they are crashes."""
    total = sum(w for _, _, w in STEPS)
    x = rng.uniform(0, total)
    for name, fn, w in STEPS:
        x -= w
        if x <= 0:
            break
    before = sch.func
    try:
        fn(sch, rng)
    except T.CuvilError as err:
        if "malformed node" in str(err):
            # a primitive built an invalid node from a valid function: its own defect,
            # not a refusal that says what to change
            raise RuntimeError(f"{name}: {str(err).splitlines()[0]}") from err
        if isinstance(err, RegionContractError):
            raise ContractBroken(f"{name}: {str(err).splitlines()[0]}") from err
        if name not in SEQUENCES and sch.func is not before:
            raise AssertionError(f"{name}: a refused primitive changed the function "
                                 f"({err})") from err
        return name, "refused", err
    return name, "ok", None


def random_steps(sch, rng, n: int) -> list:
    """Apply ``n`` random steps (see :func:`random_step`)."""
    return [random_step(sch, rng) for _ in range(n)]


__all__ = ["random_step", "random_steps", "blocks", "STEPS", "SEQUENCES", "ContractBroken"]
