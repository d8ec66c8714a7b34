"""The staged rule: the space for a target whose tensor intrinsics read and write their
operands in the target's own memories (an accelerator's input, weight and accumulator
buffers), generated from what the kind declares, never from its name.

A reduction block that a registered intrinsic computes (:mod:`.autotensorize`), with
every operand of the intrinsic's description declared in one of the kind's
``memories`` other than the host's, is scheduled the way an accelerator GEMM is
written by hand (``targets/toolkit/npu/gemm.py``): each operand staged into the memory
the intrinsic takes it from (``cache_read`` / ``cache_write``), every loop split into
a staged tile and the intrinsic's tile, the staged inputs computed at the last
reduction tile loop and the output written back at the last output tile loop, the
accumulator's zeroing and the update tensorized.  The decisions are a
buffering depth (1 to 3 versions of each staged input tile in flight: TVM's
``software_pipeline_stage`` on the reduction tile loop, the copies of the next tiles
running while this one is computed, and on the output tile loop, the copy-out of one
output tile overlapping the next; every target lowers it) and a staged tile per loop (a multiple of the intrinsic's extent
that divides the loop), each drawn among those that still fit: the staged tiles, times
the depth, within each memory's ``capacity_bytes`` (:class:`Sizes`); the depth is at
most the shallowest queue between the kind's engines (``queues``: a deeper pipeline
would overfill it).

Two more declarations shape the space when the kind has them.  A memory that the
description fills through an on-chip ``Move`` run by an engine of its own (Ascend's
L1 -> L0A on MTE1) is a level below the move's source: an input tile staged into it
comes through that level (``cache_read`` into the source, then into it), and an output
tile that such a move takes out (L0C -> UB) leaves through its destination, as the
hand schedules of ``targets/toolkit/npu/multicore.py`` do.  A kind with several
``cores`` gets a decision of how many cores the outermost output tile loop is spread
over (``bind`` to the core axis: 1 up to the count, each core a whole number of tiles).
The measurement is the kind's own (an accelerator's simulated cycles).

Example::

    >>> import targets
    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> from targets.toolkit.npu.gemm import gemm
    >>> _ = targets.register_target(toy_npu, replace=True)
    >>> name, m = staged_match(gemm(64), "toy-npu")
    >>> name, m.name
    ('C', 'toy.gemm_16x16x16_i8')
"""

from __future__ import annotations

import math

from cuvil_tir import dtype as D
from cuvil_tir.analysis import tree
from cuvil_tir.expr import Var
from cuvil_tir.target import as_target
from cuvil_tir.transform.software_pipeline import STAGE

from .autotensorize import matches
from .errors import TuneError
from .space import reductions_of

#: memories every host has: an operand there is not staged
HOST_SCOPES = ("global", "local", "shared")
#: buffering depths: how many versions of each staged input tile are in flight
DEPTHS = (1, 2, 3)
#: the most multiples of the intrinsic's extent a staged tile is offered at
MOST_MULTIPLES = 16


def _own_scopes(target) -> set:
    return {m.scope for m in as_target(target).kind_obj.memories} - set(HOST_SCOPES)


def staged_match(func, target):
    """``(block name, Match)`` of the first reduction block of ``func`` that an
    intrinsic supported by ``target`` computes with every operand in the target's own
    memories (and every block iterator covered); None when there is none (module doc).
    """
    own = _own_scopes(target)
    if not own:
        return None
    for name in reductions_of(func):
        for m in matches(func, name, target):
            if m.scopes and all(s in own for _, s in m.scopes) and None not in m.extents:
                return name, m
    return None


def _operands(block) -> list:
    """The block's buffers in the order :func:`_footprints` lists them."""
    return list({r.buffer.name: r for r in (*block.reads, *block.writes)})


def _level(kind, scope, output):
    """The memory a tile of ``scope`` passes through (module doc): the source of the
    move that fills it on an engine of its own (an input), the destination of the move
    that empties it on one (an output); None when the DMA reaches it directly."""
    for mv in getattr(kind, "moves", ()):
        if mv.engine not in getattr(kind, "dma_direction", ("load", "store")) and \
                (mv.src if output else mv.dst) == scope:
            return mv.dst if output else mv.src
    return None


def _block(func, name):
    return tree.get(func, tree.find_block(func, name)).block


def _footprints(block, scopes) -> list:
    """``(scope, bytes per element, iterator positions)`` of each staged operand: the
    iterators that index it (a staged tile's elements are the product of their tiles).
    """
    ivars = [iv.var for iv in block.iter_vars]
    out = []
    for region in {r.buffer.name: r for r in (*block.reads, *block.writes)}.values():
        dims = []
        for rng in region.region:
            if not (isinstance(rng.min, Var) and rng.min in ivars):
                raise TuneError(f"tune: staged space: operand {region.buffer.name!r} of "
                                f"block {block.name!r} is indexed by {rng.min}, not by one "
                                "block iterator: the staged tile's size is unknown; pass "
                                "space=your_schedule_function")
            dims.append(ivars.index(rng.min))
        out.append((scopes[region.buffer.name], D.itemsize(str(region.buffer.dtype)), dims))
    return out


class Sizes:
    """What the staged tiles of block ``name`` may be on ``target``: ``choices``, per
    block iterator, the staged tiles offered (multiples of the intrinsic's extent that
    divide the loop), ``depths`` the buffering depths, and :meth:`fits`, whether a
    choice fits the memories (module doc).

    Example::

        >>> import targets
        >>> from targets.accel.examples.toy_npu import toy_npu
        >>> from targets.toolkit.npu.gemm import gemm
        >>> _ = targets.register_target(toy_npu, replace=True)
        >>> sizes = Sizes(gemm(256), *staged_match(gemm(256), "toy-npu"), "toy-npu")
        >>> sizes.choices[0], sizes.depths, sizes.fits((256, 256, 256), 1)
        ([16, 32, 64, 128, 256], (1, 2), False)
    """

    def __init__(self, func, name, match, target):
        target = as_target(target)
        kind = target.kind_obj
        self.caps = {m.scope: m.capacity_bytes for m in kind.memories_for(target)}
        block = _block(func, name)
        scopes = dict(match.scopes)
        written = {r.buffer.name for r in block.writes}
        self.levels = {b: _level(kind, s, b in written) for b, s in scopes.items()}
        self.prints = _footprints(block, scopes)
        self.prints += [(lv, size, dims) for (_, size, dims), lv in
                        zip(self.prints, [self.levels[b] for b in _operands(block)]) if lv]
        self.choices = [[e * k for k in range(1, MOST_MULTIPLES + 1)
                         if iv.dom.extent.value % (e * k) == 0]
                        for iv, e in zip(block.iter_vars, match.extents)]
        self.extents = [iv.dom.extent.value for iv in block.iter_vars]
        self.first = next(n for n, iv in enumerate(block.iter_vars) if iv.kind == "spatial")
        deepest = min([q.depth for q in getattr(kind, "queues", {}).values()] or [DEPTHS[-1]])
        self.depths = tuple(d for d in DEPTHS if d <= deepest and
                            self.fits([c[0] for c in self.choices], d))
        cores = getattr(kind, "cores", None)
        self.cores = (cores.count, cores.axis) if cores is not None and cores.count > 1 \
            else None

    def fits(self, tiles, depth) -> bool:
        """Whether staged tiles ``tiles`` (one per block iterator), ``depth`` copies
        of each, fit every memory's capacity."""
        used: dict = {}
        for scope, size, dims in self.prints:
            used[scope] = used.get(scope, 0) + depth * size * math.prod(tiles[d] for d in dims)
        return all(self.caps.get(s) is None or b <= self.caps[s] for s, b in used.items())

    def sample(self, sch) -> tuple:
        """``(tiles, depth, cores)`` drawn by ``sch``: the depth, the cores (on a kind
        with several: those that some tile of the first output loop leaves a whole
        number of tiles each), then each tile among those that fit with the tiles drawn
        before it and the smallest after it (the first output loop's: a whole number of
        tiles per core)."""
        depth = sch.sample_categorical(list(self.depths), [1] * len(self.depths))
        first, cores = self.first, 1
        if self.cores is not None:
            fit = [c for c in range(1, self.cores[0] + 1)
                   if any((self.extents[first] // t) % c == 0 for t in self.choices[first])]
            cores = sch.sample_categorical(fit, [1] * len(fit)) if len(fit) > 1 else 1
        tiles: list = []
        for n, choice in enumerate(self.choices):
            rest = [c[0] for c in self.choices[n + 1:]]
            fit = [t for t in choice if self.fits([*tiles, t, *rest], depth) and
                   (n != first or (self.extents[n] // t) % cores == 0)]
            tiles.append(sch.sample_categorical(fit, [1] * len(fit)))
        return tiles, depth, cores


def staged_space(func, target, name, match):
    """The staged space of block ``name`` of ``func`` around ``match`` (module doc).

    Example::

        >>> import schedules as S, targets
        >>> from targets.accel.examples.toy_npu import toy_npu
        >>> from targets.toolkit.npu.gemm import gemm
        >>> _ = targets.register_target(toy_npu, replace=True)
        >>> f = gemm(32)
        >>> sch = S.Schedule(f, seed=0)
        >>> staged_space(f, "toy-npu", *staged_match(f, "toy-npu"))(sch)
        >>> "npu.inp" in str(sch.func)
        True
    """
    target = as_target(target)
    sizes = Sizes(func, name, match, target)
    if not sizes.depths:
        raise TuneError(f"tune: staged space: no tile of block {name!r} fits the memories "
                        f"of {target.kind!r} (even the intrinsic's own tile); pass "
                        "space=your_schedule_function")
    scopes = dict(match.scopes)
    block = _block(func, name)
    written = {r.buffer.name for r in block.writes}
    reads = [r.buffer.name for r in block.reads]
    kinds = [iv.kind for iv in block.iter_vars]
    spatial = [n for n, k in enumerate(kinds) if k == "spatial"]
    reduce = [n for n, k in enumerate(kinds) if k != "spatial"]

    levels = sizes.levels
    c_name = block.writes[0].buffer.name

    def space(sch):
        tiles, depth, cores = sizes.sample(sch)
        blk = sch.get_block(name)
        staged = []
        for i, b in enumerate(reads):
            if b in written:
                continue
            if levels[b]:       # through the level above first (module doc)
                staged.append(sch.cache_read(blk, i, levels[b]))
            staged.append(sch.cache_read(blk, i, scopes[b]))
        outs = [sch.cache_write(blk, 0, levels[c_name])] if levels[c_name] else []
        outs.append(sch.cache_write(blk, 0, scopes[c_name]))
        outer, mid, inner = {}, {}, {}
        for n, lp in enumerate(sch.get_loops(blk)):
            outer[n], rest = sch.split(lp, [None, tiles[n]])
            mid[n], inner[n] = sch.split(rest, [None, match.extents[n]])
        sch.reorder(*[outer[n] for n in spatial + reduce], *[mid[n] for n in spatial + reduce],
                    *[inner[n] for n in match.order])
        ko, jo = outer[reduce[-1]], outer[spatial[-1]]
        for s in reversed(staged):       # consumers first: each lands under ko
            sch.compute_at(s, ko)
        for out in reversed(outs):       # the accumulator's copy-out, then the level's
            sch.reverse_compute_at(out, jo)
        if cores > 1:
            core_loop, _ = sch.split(outer[spatial[0]], [cores, None])
            sch.bind(core_loop, sizes.cores[1])
        init = sch.decompose_reduction(blk, outer[reduce[0]])
        sch.tensorize(inner[match.order[0]], match.name)
        zero = [m for m in matches(sch.func, init.name, target)
                if m.scopes and all(s in scopes.values() for _, s in m.scopes)]
        if zero:
            sch.tensorize(sch.get_loops(init)[-len(spatial)], zero[0].name)
        if depth > 1:   # the copies of the next tiles run while this one is computed
            sch.annotate(ko, STAGE, [0] * len(staged) + [depth - 1])
            sch.annotate(jo, STAGE, [0, 0] + [1] * len(outs))   # zero, reduction | out

    return space


__all__ = ["HOST_SCOPES", "Sizes", "staged_match", "staged_space"]
