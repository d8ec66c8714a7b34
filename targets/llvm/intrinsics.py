"""Conversions, math intrinsics and guarded integer division, as LLVM IR text.

Semantics follow numpy:

* ``float16`` and ``bfloat16`` arithmetic and math run in ``float32`` and round back
  after every operation (what numpy does for float16); ``bfloat16`` rounds to
  nearest even, NaN stays NaN.  ``float64 -> float16`` goes through ``float32``
  (double rounding, off by one ulp in rare ties) because the host's C runtime has no
  ``__truncdfhf2``.
* integer division and modulo by zero give 0, ``INT_MIN / -1`` gives ``INT_MIN``
  (wraps); neither traps.  ``FloorDiv``/``FloorMod`` round toward negative infinity.
* ``round`` is half-to-even (``llvm.roundeven``); ``tanh`` and ``erf`` call libm.

Example::

    >>> from targets.llvm.builder import IRBuilder
    >>> b = IRBuilder()
    >>> convert(b, "%x", "int32", "float32")
    '%t0'
    >>> b.lines
    ['  %t0 = sitofp i32 %x to float']
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.errors import CodegenError
from cuvil_tir.expr import Broadcast, IntImm, Ramp

from .builder import IRBuilder
from .types import reg_type, scalar_const, splat

_ZERO_F = "0x0000000000000000"


def _suffix(dt: str) -> str:
    t = {"float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16", "int32": "i32",
         "int64": "i64"}[D.element(dt)]
    n = D.lanes(dt)
    return t if n == 1 else f"v{n}{t}"


def compute_dtype(dt: str) -> str:
    """The dtype arithmetic on ``dt`` runs in (float32 for float16/bfloat16).

    Example::

        >>> compute_dtype("bfloat16x4"), compute_dtype("int8")
        ('float32x4', 'int8')
    """
    return D.with_lanes("float32", D.lanes(dt)) if D.element(dt) in ("float16", "bfloat16") \
        else dt


def _bf16_to_f32(b: IRBuilder, v: str, dt: str) -> str:
    n = D.lanes(dt)
    i32 = reg_type(D.with_lanes("int32", n))
    w = b.op(f"zext {reg_type(dt)} {v} to {i32}")
    s = b.op(f"shl {i32} {w}, {splat('16', D.with_lanes('int32', n))}")
    return b.op(f"bitcast {i32} {s} to {reg_type(D.with_lanes('float32', n))}")


def _f32_to_bf16(b: IRBuilder, v: str, dt: str) -> str:
    n = D.lanes(dt)
    i32dt = D.with_lanes("int32", n)
    i32, f32 = reg_type(i32dt), reg_type(D.with_lanes("float32", n))
    bits = b.op(f"bitcast {f32} {v} to {i32}")
    hi = b.op(f"lshr {i32} {bits}, {splat('16', i32dt)}")
    lsb = b.op(f"and {i32} {hi}, {splat('1', i32dt)}")
    bias = b.op(f"add {i32} {lsb}, {splat('32767', i32dt)}")
    r = b.op(f"add {i32} {bits}, {bias}")
    top = b.op(f"lshr {i32} {r}, {splat('16', i32dt)}")
    i16 = reg_type(D.with_lanes("int16", n))
    t = b.op(f"trunc {i32} {top} to {i16}")
    nan = b.op(f"fcmp uno {f32} {v}, {v}")
    return b.op(f"select {reg_type(D.with_lanes('bool', n))} {nan}, {i16} "
                f"{splat('32704', D.with_lanes('int16', n))}, {i16} {t}")


def widen(b: IRBuilder, v: str, dt: str) -> str:
    """``v`` of dtype ``dt`` as its compute dtype (see :func:`compute_dtype`)."""
    e = D.element(dt)
    if e == "bfloat16":
        return _bf16_to_f32(b, v, dt)
    if e == "float16":
        return b.op(f"fpext {reg_type(dt)} {v} to {reg_type(compute_dtype(dt))}")
    return v


def narrow(b: IRBuilder, v: str, dt: str) -> str:
    """A compute-dtype value ``v`` rounded back to ``dt``."""
    e = D.element(dt)
    if e == "bfloat16":
        return _f32_to_bf16(b, v, dt)
    if e == "float16":
        return b.op(f"fptrunc {reg_type(compute_dtype(dt))} {v} to {reg_type(dt)}")
    return v


def convert(b: IRBuilder, v: str, src: str, dst: str) -> str:
    """Cast a register value between dtypes (same lanes), with C/numpy semantics.

    Example::

        >>> b = IRBuilder()
        >>> _ = convert(b, "%x", "float32", "bool"); b.lines[-1]
        '  %t0 = fcmp une float %x, 0x0000000000000000'
    """
    if src == dst:
        return v
    n = D.lanes(dst)
    f32 = D.with_lanes("float32", n)
    se, de = D.element(src), D.element(dst)
    if se in ("float16", "bfloat16"):
        return convert(b, widen(b, v, src), D.with_lanes("float32", n), dst)
    if de in ("float16", "bfloat16"):
        return narrow(b, convert(b, v, src, f32), dst)
    ts, td = reg_type(src), reg_type(dst)
    if de == "bool":
        if D.is_float(se):
            return b.op(f"fcmp une {ts} {v}, {splat(_ZERO_F, src)}")
        return b.op(f"icmp ne {ts} {v}, {splat('0', src)}")
    if D.is_float(se) and D.is_float(de):
        op = "fpext" if D.bits(de) > D.bits(se) else "fptrunc"
        return b.op(f"{op} {ts} {v} to {td}")
    if D.is_float(se):
        return b.op(f"{'fptosi' if D.is_int(de) else 'fptoui'} {ts} {v} to {td}")
    if D.is_float(de):
        return b.op(f"{'sitofp' if D.is_int(se) else 'uitofp'} {ts} {v} to {td}")
    sb, db = D.bits(se), D.bits(de)
    if sb == db:
        return v
    if db < sb:
        return b.op(f"trunc {ts} {v} to {td}")
    return b.op(f"{'sext' if D.is_int(se) else 'zext'} {ts} {v} to {td}")


def declare_intrinsic(b: IRBuilder, name: str, dt: str, nargs: int) -> str:
    """Declare ``llvm.<name>.<type suffix>`` taking ``nargs`` values of ``dt``; its name.

    Example::

        >>> declare_intrinsic(IRBuilder(), "maximum", "float32x8", 2)
        'llvm.maximum.v8f32'
    """
    fn = f"llvm.{name}.{_suffix(dt)}"
    t = reg_type(dt)
    extra = ", i1" if name == "abs" and D.is_integer(dt) else ""
    b.declare(fn, f"declare {t} @{fn}({', '.join([t] * nargs)}{extra})")
    return fn


def libm_call(b: IRBuilder, name: str, args: list[str], dt: str) -> str:
    """Call the C math library's ``name`` (``namef`` for float32) on register values
    of float dtype ``dt``, lane by lane (libm has no vector entry points).

    Example::

        >>> b = IRBuilder()
        >>> _ = libm_call(b, "tanh", ["%x"], "float32"); b.lines[-1]
        '  %t0 = call float @tanhf(float %x)'
    """
    cdt = compute_dtype(dt)
    xs = [widen(b, a, dt) for a in args]
    sym = name + ("f" if D.element(cdt) == "float32" else "")
    st = reg_type(D.element(cdt))
    b.declare(sym, f"declare {st} @{sym}({', '.join([st] * len(xs))}) nounwind")
    n = D.lanes(cdt)
    if n == 1:
        r = b.op(f"call {st} @{sym}({', '.join(f'{st} {x}' for x in xs)})")
        return narrow(b, r, dt)
    vt = reg_type(cdt)
    out = "poison"
    for lane in range(n):
        lanes = [b.op(f"extractelement {vt} {x}, i32 {lane}") for x in xs]
        y = b.op(f"call {st} @{sym}({', '.join(f'{st} {x}' for x in lanes)})")
        out = b.op(f"insertelement {vt} {out}, {st} {y}, i32 {lane}")
    return narrow(b, out, dt)


def math_call(b: IRBuilder, intrinsic: str, args: list[str], dt: str) -> str:
    """Call the LLVM intrinsic ``llvm.<intrinsic>`` on register values of dtype ``dt``
    (float16/bfloat16 computed in float32; integer ``abs`` does not wrap-trap).

    Example::

        >>> b = IRBuilder()
        >>> _ = math_call(b, "roundeven", ["%x"], "float32"); b.lines[-1]
        '  %t0 = call float @llvm.roundeven.f32(float %x)'
    """
    if D.is_integer(dt):
        if intrinsic != "abs":
            raise CodegenError(f"llvm codegen: intrinsic {intrinsic!r} on integer dtype "
                               f"{dt}")
        fn = declare_intrinsic(b, "abs", dt, 1)
        return b.op(f"call {reg_type(dt)} @{fn}({reg_type(dt)} {args[0]}, i1 false)")
    cdt = compute_dtype(dt)
    xs = [widen(b, a, dt) for a in args]
    t = reg_type(cdt)
    fn = declare_intrinsic(b, intrinsic, cdt, len(xs))
    r = b.op(f"call {t} @{fn}({', '.join(f'{t} {x}' for x in xs)})")
    return narrow(b, r, dt)


def int_divmod(b: IRBuilder, kind: str, x: str, y: str, dt: str) -> str:
    """``Div``/``Mod``/``FloorDiv``/``FloorMod`` of two integer values, never trapping.

    Division by zero gives 0; ``INT_MIN / -1`` wraps to ``INT_MIN``.

    Example::

        >>> b = IRBuilder()
        >>> r = int_divmod(b, "Div", "%a", "%b", "uint8")
        >>> [l.split("= ")[1].split(" ")[0] for l in b.lines]
        ['icmp', 'select', 'udiv', 'select']
    """
    t = reg_type(dt)
    bt = reg_type(D.with_lanes("bool", D.lanes(dt)))
    zero, one = splat("0", dt), splat("1", dt)
    is0 = b.op(f"icmp eq {t} {y}, {zero}")
    if not D.is_int(dt):
        safe = b.op(f"select {bt} {is0}, {t} {one}, {t} {y}")
        r = b.op(f"{'udiv' if kind in ('Div', 'FloorDiv') else 'urem'} {t} {x}, {safe}")
        return b.op(f"select {bt} {is0}, {t} {zero}, {t} {r}")
    # y == -1 is handled apart: sdiv/srem of INT_MIN by -1 is undefined in LLVM
    ism1 = b.op(f"icmp eq {t} {y}, {splat('-1', dt)}")
    bad = b.op(f"or {bt} {is0}, {ism1}")
    safe = b.op(f"select {bt} {bad}, {t} {one}, {t} {y}")
    if kind in ("Div", "FloorDiv"):
        q = b.op(f"sdiv {t} {x}, {safe}")
        if kind == "FloorDiv":
            r = b.op(f"srem {t} {x}, {safe}")
            q = b.op(f"sub {t} {q}, {_floor_adjust(b, r, y, dt)}")
        neg = b.op(f"sub {t} {zero}, {x}")
        q = b.op(f"select {bt} {ism1}, {t} {neg}, {t} {q}")
        return b.op(f"select {bt} {is0}, {t} {zero}, {t} {q}")
    r = b.op(f"srem {t} {x}, {safe}")
    if kind == "FloorMod":
        adj = _floor_adjust(b, r, y, dt)
        keep = b.op(f"mul {t} {adj}, {y}")
        r = b.op(f"add {t} {r}, {keep}")
    return b.op(f"select {bt} {bad}, {t} {zero}, {t} {r}")


def _floor_adjust(b: IRBuilder, r: str, y: str, dt: str) -> str:
    """1 where the truncated remainder ``r`` is nonzero and has the other sign of ``y``."""
    t = reg_type(dt)
    bt = reg_type(D.with_lanes("bool", D.lanes(dt)))
    zero = splat("0", dt)
    nz = b.op(f"icmp ne {t} {r}, {zero}")
    rneg = b.op(f"icmp slt {t} {r}, {zero}")
    yneg = b.op(f"icmp slt {t} {y}, {zero}")
    diff = b.op(f"xor {bt} {rneg}, {yneg}")
    both = b.op(f"and {bt} {nz}, {diff}")
    return b.op(f"zext {bt} {both} to {t}")


def bitwise_not(b: IRBuilder, x: str, dt: str) -> str:
    """``~x`` on the two's complement pattern of integer dtype ``dt``.

    Example::

        >>> b = IRBuilder()
        >>> bitwise_not(b, "%x", "int8"), b.lines[0]
        ('%t0', '  %t0 = xor i8 %x, -1')
    """
    return b.op(f"xor {reg_type(dt)} {x}, {splat(scalar_const(-1, dt), dt)}")


def shift(b: IRBuilder, left: bool, x: str, y: str, dt: str, amount=None) -> str:
    """``x`` shifted left (or right: arithmetic for a signed ``dt``, logical for an
    unsigned one) by ``y`` (:mod:`cuvil_tir.ops.bitwise`); ``amount`` is the shift's
    amount expression: when it is not a constant in range, the result is selected
    against what an out-of-range shift leaves (LLVM makes such a shift poison, which
    ``select`` does not pass on from the arm it does not take).

    Example::

        >>> b = IRBuilder()
        >>> shift(b, False, "%x", "4", "uint8", None)
        '%t2'
        >>> b.lines[0]
        '  %t0 = lshr i8 %x, 4'
    """
    t = reg_type(dt)
    inst = "shl" if left else "ashr" if D.is_int(dt) else "lshr"
    bits = D.bits(D.element(dt))
    c = amount.value if isinstance(amount, Broadcast) else amount
    if isinstance(c, Ramp) and isinstance(c.base, IntImm) and isinstance(c.stride, IntImm):
        lanes = [c.base.value + k * c.stride.value for k in range(c.lanes)]
    else:
        lanes = [c.value] if isinstance(c, IntImm) else None
    if lanes is not None and all(0 <= v < bits for v in lanes):
        return b.op(f"{inst} {t} {x}, {y}")
    shifted = b.op(f"{inst} {t} {x}, {y}")
    # unsigned: a negative amount is out of range too
    ok = b.op(f"icmp ult {t} {y}, {splat(str(bits), dt)}")
    if inst == "ashr":
        fill = b.op(f"ashr {t} {x}, {splat(str(bits - 1), dt)}")
    else:
        fill = splat("0", dt)
    bt = reg_type(D.with_lanes("bool", D.lanes(dt)))
    return b.op(f"select {bt} {ok}, {t} {shifted}, {t} {fill}")

