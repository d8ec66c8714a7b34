"""``offset_to_unsigned``: an int8 x int8 -> int32 reduction rewritten as uint8 x int8
plus a compensation computed once, the form ``vpdpbusd`` (unsigned bytes times signed
bytes) computes at full rate.

``a * b = (a + 128) * b - 128 * b``, so with ``A_u8 = A + 128`` (every int8 lands in
0..255: exact) the sum over k is ``sum(A_u8 * B) - 128 * sum(B)``.  The second term
depends on B only: one reduction per output column, ``B_sum``, which becomes the
reduction's init (the sum starts from it, as oneDNN's and TVM's VNNI kernels start
from a compensation computed with the packed weights), instead of a compensation
recomputed on every tensorized step.  int32 arithmetic wraps modulo 2**32 on both
sides, so the result is the original one bit for bit.

Before/after ``offset_to_unsigned("C")`` (A int8, B int8, C int32)::

                                        A_u8[i, k] = uint8(int32(A[i, k]) + 128)
                                        B_sum[j] = sum(int32(B[k, j]) * -128, k)
    C[i, j] = 0  (init)                 C[i, j] = B_sum[j]  (init)
    C[i, j] += int32(A[i, k]) *         C[i, j] += int32(A_u8[i, k]) *
               int32(B[k, j])                      int32(B[k, j])

The block must still be in the function's root, under loops of its own (apply it
first), its body ``C = C + int32(A[...]) * int32(B[...])`` with int8 A and B and an
int32 C.  Returns the two new blocks ``[A_u8, B_sum]``.

Example::

    >>> import numpy as np, targets
    >>> from schedules import Schedule
    >>> from schedules.intrinsics.x86_gemm import gemm_func
    >>> sch = Schedule(gemm_func(4, 16, 8, "int8", "int8", "int32"))
    >>> sch.offset_to_unsigned("C")
    [BlockRV('A_u8'), BlockRV('B_sum')]
    >>> rng = np.random.default_rng(0)
    >>> a, b = (rng.integers(-128, 128, s).astype("int8") for s in ((4, 8), (8, 16)))
    >>> c = np.zeros((4, 16), "int32")
    >>> targets.build(sch, "llvm")(a, b, c)
    >>> bool((c == a.astype("int32") @ b.astype("int32")).all())
    True
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import Add, BufferLoad, Cast, IntImm, Mul, Var, const
from cuvil_tir.stmt import Block, BufferRegion, BufferStore, IterVar, Range, SeqStmt, seq
from cuvil_tir.visitor import substitute, used_vars

from ..analysis import block_path, fresh_name
from ..errors import ScheduleError, schedule_error
from ..handles import BlockRV
from ..primitive import BLOCK, BLOCKS, install_methods, primitive
from ..schedule import Schedule
from ..primitives.nests import block_names, make_nest, subtrees, with_fields

PRIM = "offset_to_unsigned"
#: the expected form, for the messages
FORM = "C = C + int32(A[...]) * int32(B[...]) with int8 A and B and an int32 C"


class OffsetError(ScheduleError):
    """``offset_to_unsigned`` refused a block (not an int8 x int8 -> int32 product
    reduction in the function's root).

    Example::

        >>> OffsetError("offset_to_unsigned: block C computes a float sum").code
        'CVL-E103'
    """


def _refuse(why: str, func, blk=None):
    return schedule_error(OffsetError, PRIM, f"{why}; expected {FORM}, in the "
                          "function's root under loops of its own (offset first, "
                          "then tile)", func, blk)


def _operands(blk, func):
    """``(A load, B load)`` of the block's product, or the refusal."""
    st, c = blk.body, blk.writes[0].buffer if len(blk.writes) == 1 else None
    ok = (isinstance(st, BufferStore) and st.buffer is c and str(c.dtype) == "int32"
          and isinstance(blk.init, BufferStore) and isinstance(blk.init.value, IntImm)
          and blk.init.value.value == 0 and isinstance(st.value, Add))
    if ok:
        acc, prod = st.value.a, st.value.b
        ok = (isinstance(acc, BufferLoad) and acc.buffer is c and isinstance(prod, Mul)
              and all(isinstance(x, Cast) and str(x.dtype) == "int32" and
                      isinstance(x.value, BufferLoad) and str(x.value.dtype) == "int8"
                      for x in (prod.a, prod.b)))
    if not ok:
        raise _refuse(f"block {blk.name!r} computes {st}", func, blk)
    return prod.a.value, prod.b.value


def _flip_nest(a_buf, a_u8, name):
    vs = [IterVar(Var(f"v{d}", s.dtype), Range(const(0, s.dtype), s), "spatial")
          for d, s in enumerate(a_buf.shape)]
    idx = tuple(iv.var for iv in vs)
    point = tuple(Range(v, const(1, v.dtype)) for v in idx)
    value = Cast("uint8", Cast("int32", a_buf.load(idx)) + const(128, "int32"))
    blk = Block(name, tuple(vs), (BufferRegion(a_buf, point),),
                (BufferRegion(a_u8, point),), BufferStore(a_u8, value, idx))
    return make_nest(blk, [None] * len(vs), {})


def _sum_nest(blk, b_load, spatial, reduce, b_sum, name):
    """``B_sum[spatial] = sum(int32(B) * -128)`` over the block's reduction vars."""
    fresh = {iv.var: Var(iv.var.name, iv.var.dtype) for iv in spatial + reduce}
    ivs = tuple(IterVar(fresh[iv.var], iv.dom, iv.kind) for iv in spatial + reduce)
    at = tuple(fresh[iv.var] for iv in spatial)
    load = substitute(b_load, fresh)
    point = tuple(Range(v, const(1, v.dtype)) for v in at)
    out = BufferRegion(b_sum, point)
    value = b_sum.load(at) + Cast("int32", load) * const(-128, "int32")
    red = Block(name, ivs, (BufferRegion(load.buffer, tuple(
        Range(i, const(1, i.dtype)) for i in load.indices)),), (out,),
        BufferStore(b_sum, value, at), BufferStore(b_sum, const(0, "int32"), at))
    return make_nest(red, [None] * len(ivs), {})


@primitive(PRIM, block=BLOCK, returns=BLOCKS, error=OffsetError)
def offset_to_unsigned(func, block):
    """Rewrite the int8 x int8 -> int32 reduction ``block`` as uint8 x int8 (its first
    operand plus 128, in a new block ``A_u8``) starting from the compensation ``-128 *
    sum(B)`` (a new reduction ``B_sum``, once per column): the form ``vpdpbusd``
    computes without a per-step correction.  Exact (int32 wraps alike on both sides).
    Returns ``[A_u8, B_sum]``.

    Example::

        >>> from schedules import Schedule
        >>> from schedules.intrinsics.x86_gemm import gemm_func
        >>> sch = Schedule(gemm_func(4, 16, 8, "int8", "int8", "int32"))
        >>> _ = sch.offset_to_unsigned("C")
        >>> print(tree.get(sch.func, tree.find_block(sch.func, "C")).block.init)
        C[v_i, v_j] = B_sum[v_j]
    """
    path = block_path(func, block, PRIM)
    realize = tree.get(func, path)
    blk = realize.block
    root = tree.get(func, ()).block
    if len(path) < 3 or path[:2] != ("block", "body") or \
            tree.enclosing_block(func, path) != ():
        raise _refuse(f"block {blk.name!r} is not in the function's root", func, blk)
    if blk.init is None:
        raise _refuse(f"block {blk.name!r} has no init (decomposed already?)", func, blk)
    a_load, b_load = _operands(blk, func)
    if a_load.buffer is b_load.buffer:
        raise _refuse(f"block {blk.name!r} multiplies {a_load.buffer.name!r} by itself: "
                      "only the first operand is offset, so the two need buffers of "
                      "their own (cache_read one of them first)", func, blk)
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value):
        raise _refuse(f"block {blk.name!r} runs under T.where({realize.predicate})",
                      func, blk)
    used = {id(v) for i in b_load.indices for v in used_vars(i)}
    spatial = [iv for iv in blk.iter_vars if iv.kind == "spatial" and id(iv.var) in used]
    reduce = [iv for iv in blk.iter_vars if iv.kind == "reduce"]
    if any(id(iv.var) in used for iv in blk.iter_vars
           if iv.kind not in ("spatial", "reduce")):
        raise _refuse(f"block {blk.name!r}'s B index uses an iterator that is neither "
                      "spatial nor a reduction", func, blk)
    taken = block_names(func.body) | {b.name for b in func.buffers}
    a_buf = a_load.buffer
    a_name = fresh_name(f"{a_buf.name}_u8", taken)
    s_name = fresh_name(f"{b_load.buffer.name}_sum", taken | {a_name})
    a_u8 = Buffer(a_buf.shape, "uint8", a_name)
    b_sum = Buffer(tuple(iv.dom.extent for iv in spatial) or (const(1),), "int32", s_name)
    at = tuple(iv.var for iv in spatial) or (const(0),)
    c = blk.writes[0]
    init = BufferStore(blk.init.buffer, b_sum.load(at), blk.init.indices)
    u8_load = BufferLoad(a_u8, a_load.indices)
    prod = blk.body.value.b
    body = BufferStore(blk.body.buffer, Add(blk.body.value.a, Mul(
        Cast("int32", u8_load), prod.b)), blk.body.indices)
    reads = tuple(BufferRegion(a_u8, r.region) if r.buffer is a_buf else r
                  for r in blk.reads if r.buffer is not c.buffer)
    reads += (BufferRegion(b_sum, tuple(Range(v, const(1, v.dtype)) for v in at)),)
    if any(r.buffer is c.buffer for r in blk.reads):
        reads = (next(r for r in blk.reads if r.buffer is c.buffer),) + reads
    new_blk = with_fields(blk, body=body, init=init, reads=reads)
    func = tree.replace(func, path + ("block",), new_blk)
    nests = [_flip_nest(a_buf, a_u8, a_name),
             _sum_nest(blk, b_load, spatial, reduce, b_sum, s_name)]
    pos = path[2][1] if isinstance(root.body, SeqStmt) else 0
    root = tree.get(func, ()).block
    new_root = with_fields(root, body=seq(*[*subtrees(root.body)[:pos], *nests,
                                            *subtrees(root.body)[pos:]]),
                           alloc_buffers=root.alloc_buffers + (a_u8, b_sum))
    return tree.replace(func, ("block",), new_root), [BlockRV(a_name), BlockRV(s_name)]


install_methods(Schedule)     # registered after Schedule was made: give it the method

__all__ = ["OffsetError", "offset_to_unsigned"]
