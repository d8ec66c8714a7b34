"""Which CPU features a target's code may use, and which of them this host lacks.

Building for another CPU (``mcpu="sapphirerapids"``, ``mattr="+avx512fp16"``) is
always allowed; *running* that code on a host without the features LLVM used stops
the process with SIGILL.  So before a module runs, :func:`missing_on_host` compares the
target's instruction-set features with the host's and the module refuses with a
:class:`~cuvil_tir.errors.HostFeatureError` naming what is missing.

The target's features are LLVM's own answer, not a table of CPU names: each entry of
:data:`SNIPPETS` is a tiny function of generic IR (the only IR Cuvil emits) that LLVM
compiles to a telltale instruction exactly when the feature is on, e.g. ``fadd <32 x
half>`` becomes ``vaddph`` only with ``avx512fp16``.  :func:`probe_ir` puts them in one
module, which the CPU probe of :mod:`targets.llvm.cpu` compiles in its child process
(once per CPU and feature string); :func:`features_in` reads the assembly.  Features a
user names in ``mattr`` (``+amx-tile``) count as well.

Example::

    >>> asm = "p_avx2:\\n\\tvpaddd\\t%ymm1, %ymm0, %ymm0\\n.Lfunc_end"
    >>> features_in(asm)
    ['avx2']
    >>> missing_on_host(["avx2", "avx512fp16"], "", "+avx,+avx2,+fma")
    ['avx512fp16']
"""

from __future__ import annotations

import re

_W512 = '"min-legal-vector-width"="512" "prefer-vector-width"="512"'
_W256 = '"min-legal-vector-width"="256" "prefer-vector-width"="256"'


def _pairs(n: int, odd: int) -> str:
    return ", ".join(f"i32 {2 * i + odd}" for i in range(n))


def _dot16(lanes: int) -> tuple:
    """``acc + a[even] * b[even] + a[odd] * b[odd]`` on int16 pairs: VNNI's vpdpwssd."""
    n, w = lanes, 2 * lanes
    body = (f"%sa = sext <{w} x i16> %a to <{w} x i32>\n"
            f"  %sb = sext <{w} x i16> %b to <{w} x i32>\n"
            f"  %m = mul nsw <{w} x i32> %sa, %sb\n"
            f"  %e = shufflevector <{w} x i32> %m, <{w} x i32> poison, <{n} x i32> "
            f"<{_pairs(n, 0)}>\n"
            f"  %o = shufflevector <{w} x i32> %m, <{w} x i32> poison, <{n} x i32> "
            f"<{_pairs(n, 1)}>\n"
            f"  %s = add <{n} x i32> %e, %o\n"
            f"  %r = add <{n} x i32> %acc, %s")
    return f"<{n} x i32> %acc, <{w} x i16> %a, <{w} x i16> %b", body, f"<{n} x i32>"


_PERMUTE = ", ".join(f"i32 {(i * 37 + 11) % 128}" for i in range(64))

#: feature -> (parameters, body computing %r, return type, instruction that shows it,
#: function attributes)
SNIPPETS = {
    "ssse3": ("<4 x i32> %a", "%r = call <4 x i32> @llvm.abs.v4i32(<4 x i32> %a, i1 false)",
              "<4 x i32>", r"\bv?pabsd\b", _W512),
    "sse4.1": ("<4 x i32> %a, <4 x i32> %b",
               "%r = call <4 x i32> @llvm.smin.v4i32(<4 x i32> %a, <4 x i32> %b)",
               "<4 x i32>", r"\bv?pminsd\b", _W512),
    "sse4.2": ("<2 x i64> %a, <2 x i64> %b",
               "%c = icmp sgt <2 x i64> %a, %b\n  %r = sext <2 x i1> %c to <2 x i64>",
               "<2 x i64>", r"\bv?pcmpgtq\b", _W512),
    "popcnt": ("i32 %a", "%r = call i32 @llvm.ctpop.i32(i32 %a)", "i32", r"\bpopcnt",
               _W512),
    "lzcnt": ("i32 %a", "%r = call i32 @llvm.ctlz.i32(i32 %a, i1 false)", "i32",
              r"\blzcnt", _W512),
    "bmi": ("i32 %a, i32 %b", "%n = xor i32 %a, -1\n  %r = and i32 %n, %b", "i32",
            r"\bandn", _W512),
    "bmi2": ("i32 %a, i32 %b", "%r = shl i32 %a, %b", "i32", r"\bshlx", _W512),
    "movbe": ("ptr %p", "%v = load i32, ptr %p\n  %r = call i32 @llvm.bswap.i32(i32 %v)",
              "i32", r"\bmovbe", _W512),
    "avx": ("<8 x float> %a, <8 x float> %b", "%r = fadd <8 x float> %a, %b",
            "<8 x float>", r"%ymm", _W512),
    "avx2": ("<8 x i32> %a, <8 x i32> %b", "%r = add <8 x i32> %a, %b", "<8 x i32>",
             r"\bvpaddd\s+%ymm", _W512),
    "fma": ("float %a, float %b, float %c",
            "%r = call float @llvm.fma.f32(float %a, float %b, float %c)", "float",
            r"\bvfmadd", _W512),
    "f16c": ("half %a", "%r = fpext half %a to float", "float", r"\bvcvtph2ps", _W512),
    "avx512f": ("<16 x float> %a, <16 x float> %b", "%r = fadd <16 x float> %a, %b",
                "<16 x float>", r"%zmm", _W512),
    "avx512bw": ("<64 x i8> %a, <64 x i8> %b", "%r = add <64 x i8> %a, %b", "<64 x i8>",
                 r"\bvpaddb\s+%zmm", _W512),
    "avx512dq": ("<8 x double> %a", "%r = fptosi <8 x double> %a to <8 x i64>",
                 "<8 x i64>", r"\bvcvttpd2qq", _W512),
    "avx512vl": ("<4 x i64> %a",
                 "%r = call <4 x i64> @llvm.abs.v4i64(<4 x i64> %a, i1 false)",
                 "<4 x i64>", r"\bvpabsq\s+%ymm", _W512),
    "avx512cd": ("<16 x i32> %a",
                 "%r = call <16 x i32> @llvm.ctlz.v16i32(<16 x i32> %a, i1 false)",
                 "<16 x i32>", r"\bvplzcntd", _W512),
    "avx512vpopcntdq": ("<16 x i32> %a",
                        "%r = call <16 x i32> @llvm.ctpop.v16i32(<16 x i32> %a)",
                        "<16 x i32>", r"\bvpopcntd", _W512),
    "avx512bitalg": ("<64 x i8> %a", "%r = call <64 x i8> @llvm.ctpop.v64i8(<64 x i8> %a)",
                     "<64 x i8>", r"\bvpopcntb", _W512),
    "avx512vbmi": ("<64 x i8> %a, <64 x i8> %b",
                   f"%r = shufflevector <64 x i8> %a, <64 x i8> %b, <64 x i32> <{_PERMUTE}>",
                   "<64 x i8>", r"\bvperm[it]?2?b\b", _W512),
    "avx512vbmi2": ("<32 x i16> %a, <32 x i16> %b, <32 x i16> %c",
                    "%r = call <32 x i16> @llvm.fshl.v32i16(<32 x i16> %a, <32 x i16> %b, "
                    "<32 x i16> %c)", "<32 x i16>", r"\bvpshldvw", _W512),
    "avx512vnni": _dot16(16) + (r"^\s*vpdpwssd", _W512),
    "avxvnni": _dot16(8) + (r"\{vex\}\s*vpdpwssd", _W256),
    "gfni": ("<64 x i8> %a", "%r = call <64 x i8> @llvm.bitreverse.v64i8(<64 x i8> %a)",
             "<64 x i8>", r"\bv?gf2p8affineqb", _W512),
    "avx512fp16": ("<32 x half> %a, <32 x half> %b", "%r = fadd <32 x half> %a, %b",
                   "<32 x half>", r"\bvaddph", _W512),
    "avx512bf16": ("<16 x float> %a", "%r = fptrunc <16 x float> %a to <16 x bfloat>",
                   "<16 x bfloat>", r"\bvcvtneps2bf16", _W512),
    "avx10.2": ("<32 x bfloat> %a, <32 x bfloat> %b", "%r = fadd <32 x bfloat> %a, %b",
                "<32 x bfloat>", r"\bvaddbf16", _W512),
}


def _symbol(feature: str) -> str:
    return "p_" + re.sub(r"\W", "_", feature)


def probe_ir() -> str:
    """One module holding every snippet of :data:`SNIPPETS` as its own function.

    Example::

        >>> "define <32 x half> @p_avx512fp16(" in probe_ir()
        True
    """
    out, attrs = [], {}
    for feature, (params, body, ret, _, attr) in SNIPPETS.items():
        group = attrs.setdefault(attr, len(attrs))
        out.append(f"define {ret} @{_symbol(feature)}({params}) #{group} {{\n"
                   f"  {body}\n  ret {ret} %r\n}}\n")
    out.extend(f"attributes #{n} = {{ {a} }}\n" for a, n in attrs.items())
    return "".join(out)


def features_in(asm: str) -> list:
    """The features whose telltale instruction LLVM chose, from the probe's assembly.

    Example::

        >>> features_in("p_fma:\\n\\tvfmadd213ss\\t%xmm2, %xmm1, %xmm0\\n.Lfunc_end1:")
        ['fma']
    """
    found = []
    for feature, (_, _, _, pattern, _) in SNIPPETS.items():
        head = _symbol(feature) + ":"
        if head not in asm:
            continue
        body = asm.split(head, 1)[1].split(".Lfunc_end", 1)[0]
        if re.search(pattern, body, re.M):
            found.append(feature)
    return found


def missing_on_host(features, mattr: str, host: str) -> list:
    """The features of ``features`` (probed) and of ``mattr`` (``"+a,-b"``: the ones it
    turns on) that the host feature string ``host`` (``"+avx,+avx2"``) does not have.

    Example::

        >>> missing_on_host(["avx"], "+amx-tile,-avx512f", "+avx")
        ['amx-tile']
    """
    have = {f[1:] for f in host.split(",") if f.startswith("+")}
    wanted = set(features) | {f[1:] for f in mattr.split(",") if f.startswith("+")}
    return sorted(wanted - have)


__all__ = ["SNIPPETS", "features_in", "missing_on_host", "probe_ir"]
