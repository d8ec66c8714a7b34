"""Register reallocation between warpgroups (Hopper's ``setmaxnreg``, sm_90a).

``cuda.setmaxnreg(count, increase)`` sets the register budget of the executing warp's
threads to ``count`` (a constant multiple of 8 in 24..256): ``increase`` 1 takes
registers from the block's pool (``setmaxnreg.inc``, waiting until enough are free),
0 gives them back (``setmaxnreg.dec``).  Every thread of a warpgroup executes it
together (``.sync.aligned``).  A warp-specialized kernel
(:mod:`targets.cuda.warp_specialize`) gives its producer warpgroup few registers and
its consumers many; since ptxas needs one register count where the two paths join,
both return to the count the kernel started with after their loops.

Values are untouched: in the interpreter the op computes nothing, but every thread of
a warpgroup must run it, with the same count (``collective="warpgroup"``, run by
:mod:`cuvil_tir.interp.gpu`); the budget is checked when the kernel is lowered
(:func:`register_split`).  The llvm and C targets refuse it with a coded error.

Example::

    >>> register_split(2, (40, 232))
    168
"""

from __future__ import annotations

from cuvil_tir.errors import CodegenError, CuvilError
from cuvil_tir.expr import IntImm
from cuvil_tir.ops import OpDef, register_op

SETMAXNREG_OP = "cuda.setmaxnreg"
#: registers of a thread block (the pool ``setmaxnreg`` draws from), a thread's most
REGISTER_FILE, THREAD_MAX = 65536, 255

_HELPER = r"""template <int N> __device__ __forceinline__ void cvl_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void cvl_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N) : "memory");
}
"""


def _valid(count) -> bool:
    return isinstance(count, int) and not isinstance(count, bool) and \
        24 <= count <= 256 and count % 8 == 0


def register_split(consumers: int, counts) -> int:
    """The register count a block of ``consumers`` + 1 warpgroups starts with (the
    launch bound's: the register file over its threads, a multiple of 8), after
    checking that ``counts`` (producer, consumer) fit it: each a multiple of 8 in
    24..256, the producer's at most it, the consumers' at least it, and all together
    within the register file.  A ``CuvilError`` saying which does not.

    Example::

        >>> register_split(1, (40, 248))
        248
    """
    threads = 128 * (consumers + 1)
    start = min(THREAD_MAX, REGISTER_FILE // threads) // 8 * 8
    if not (isinstance(counts, tuple) and len(counts) == 2 and all(map(_valid, counts))):
        raise CuvilError(f"setmaxnreg: the registers of the producer and of each consumer "
                         f"thread must be two multiples of 8 in 24..256, found {counts!r}")
    producer, consumer = counts
    total = 128 * (producer + consumers * consumer)
    if not (producer <= start <= consumer and total <= REGISTER_FILE):
        raise CuvilError(f"setmaxnreg: a block of {threads} threads starts with {start} "
                         f"registers a thread; the producer's {producer} must be at most "
                         f"that, the consumers' {consumer} at least that, and 128 x "
                         f"({producer} + {consumers} x {consumer}) = {total} within the "
                         f"{REGISTER_FILE} registers of the block")
    return start


def _text(p, e) -> str:
    count, inc = e.args
    if not (isinstance(count, IntImm) and _valid(count.value) and isinstance(inc, IntImm)):
        raise CodegenError(f"cuda codegen: {SETMAXNREG_OP} takes a constant register count "
                           f"(a multiple of 8 in 24..256) and a constant direction, found "
                           f"{e.args}")
    p.use_helper("cvl_setmaxnreg", _HELPER)
    return f"cvl_setmaxnreg_{'inc' if inc.value else 'dec'}<{count.value}>()"


register_op(OpDef(SETMAXNREG_OP, 2, "any", effect="opaque", collective="warpgroup",
                  doc="setmaxnreg(count, increase): the warp's register budget becomes "
                      "count (inc: taken from the block's pool, dec: given back)"),
            replace=True)

#: the ``cuda`` spellings of the ops (registered by the codegen)
SPELLINGS = {SETMAXNREG_OP: _text}

__all__ = ["REGISTER_FILE", "SETMAXNREG_OP", "SPELLINGS", "register_split"]
