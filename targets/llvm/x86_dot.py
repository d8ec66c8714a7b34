"""The llvm target's spellings of the dot-product ops (:mod:`cuvil_tir.ops.dot`):
``x86.dpbusd`` as ``llvm.x86.avx512.vpdpbusd.{128,256,512}`` (``vpdpbusd``; the
VEX-encoded AVX-VNNI form where the CPU has AVX-VNNI and not AVX512-VL) and
``x86.dpbf16ps`` as ``llvm.x86.avx512bf16.dpbf16ps.{128,256,512}`` (``vdpbf16ps``).

Only a CPU whose ISA extensions the target declares (``mcpu``/``mattr``, through
:func:`targets.llvm.cpu.isa_features`; the host's only for ``mcpu="native"``) gets
them: for any other the op is a ``TargetError`` (``CVL-E106``) naming the missing
extension, raised before LLVM sees the call (LLVM would abort the process).  The
operands are passed as ``i32`` vectors, the intrinsics' oldest signature, which every
LLVM since 14 reads (newer ones upgrade it to ``i8`` and ``bfloat`` vectors).

A module built for a CPU with features this host lacks (``mcpu='alderlake'``'s
AVX-VNNI on a Zen 4) is refused when called, with a ``HostFeatureError``
(:func:`targets.llvm.cpu.missing_host_features`), instead of dying of SIGILL.

Example::

    >>> from cuvil_tir import ops
    >>> callable(ops.spelling("llvm", "x86.dpbusd"))
    True
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir import ops
from cuvil_tir.errors import TargetError
from cuvil_tir.ops.dot import DPBF16PS, DPBUSD, ISA, missing_isa

from .cpu import isa_features
from .types import reg_type

_NAMES = {DPBUSD: ("llvm.x86.avx512.vpdpbusd", "vpdpbusd", 4),
          DPBF16PS: ("llvm.x86.avx512bf16.dpbf16ps", "vdpbf16ps", 2)}
#: CPUs that have each op's 512-bit form, for the error's advice
_SUGGEST = {DPBUSD: "mcpu='znver4', 'icelake-server', 'sapphirerapids' (AVX-VNNI: "
                    "'alderlake')",
            DPBF16PS: "mcpu='znver4', 'cooperlake', 'sapphirerapids'"}


def refusal(op: str, lanes: int, cpu: str, features: str) -> str | None:
    """The error message for ``op`` on ``lanes`` lanes on ``cpu``/``features``, or
    None when that CPU has what it needs.

    Example::

        >>> print(refusal("x86.dpbusd", 16, "haswell", ""))  # doctest: +ELLIPSIS
        llvm: x86.dpbusd (vpdpbusd, 512-bit) needs avx512vnni; mcpu='haswell' has none...
        >>> refusal("x86.dpbusd", 16, "znver4", "") is None
        True
    """
    have = isa_features(cpu, features)
    why = missing_isa(op, lanes, have)
    if why is None:
        return None
    _, instr, _ = _NAMES[op]
    listed = sorted(f for f in have if f in {x for alts in ISA[op].values()
                                             for alt in alts for x in alt})
    attr = f" mattr={features!r}" if features and len(features) < 80 else ""
    first = ISA[op].get(lanes, ISA[op][16])[0][0]
    return (f"llvm: {op} ({instr}, {lanes * 32}-bit) {why}; mcpu={cpu or 'generic'!r}"
            f"{attr} has {', '.join(listed) if listed else 'none of them'}.  Build for "
            f"a CPU that has it ({_SUGGEST[op]}) or add it: mattr='+{first}'")


def _group(cg, v: str, dt: str, lanes: int) -> str:
    """Operand ``v`` (a vector of bytes or bfloat16) as ``<lanes x i32>``: a single
    32-bit group is broadcast to every lane."""
    if D.lanes(dt) * D.bits(D.element(dt)) == 32:
        word = cg.b.op(f"bitcast {reg_type(dt)} {v} to i32")
        return cg._broadcast(word, "int32", lanes)
    return cg.b.op(f"bitcast {reg_type(dt)} {v} to <{lanes} x i32>")


def _spelling(op: str):
    def spell(cg, e):
        n = D.lanes(e.dtype)
        msg = refusal(op, n, cg.cpu, cg.features)
        if msg is not None:
            raise TargetError(msg)
        base, _, _ = _NAMES[op]
        fn = f"{base}.{n * 32}"
        acc_t = reg_type(e.dtype)
        word = f"<{n} x i32>"
        cg.b.declare(fn, f"declare {acc_t} @{fn}({acc_t}, {word}, {word})")
        acc = cg.expr(e.args[0])
        a = _group(cg, cg.expr(e.args[1]), e.args[1].dtype, n)
        b = _group(cg, cg.expr(e.args[2]), e.args[2].dtype, n)
        return cg.b.op(f"call {acc_t} @{fn}({acc_t} {acc}, {word} {a}, {word} {b})")
    return spell


ops.register_spellings("llvm", {DPBUSD: _spelling(DPBUSD), DPBF16PS: _spelling(DPBF16PS)})

__all__ = ["refusal"]
