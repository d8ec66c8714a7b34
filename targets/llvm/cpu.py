"""What the llvm target knows about the CPU it compiles for: ``cpu_info(target)``.

The machine is always the *target's*: ``mcpu``/``mattr`` name it, and the host is read
only for ``mcpu="native"`` (and for core count and cache sizes, unless the target pins
them with ``num_cores``, ``l1d_kb``, ``l2_kb``).  Vector width and register count drive
the vectorizer, the tile sizes of tutorials and the tuner's search space, so an AVX2
machine and an AVX-512 machine each get code sized for themselves.

A CPU name or feature is checked before LLVM ever sees it in this process: a first use
of each (cpu, features) pair compiles a probe function in a child process, because
LLVM answers some mistakes (a 32-bit-only CPU such as ``i686`` under a 64-bit triple,
an ``aarch64`` CPU on x86) with ``LLVM ERROR`` and an abort of the whole process.  The
probe also reads the vector width LLVM really uses (zmm, ymm or xmm registers).

Example::

    >>> import targets
    >>> info = cpu_info(targets.Target("llvm", mcpu="haswell"))
    >>> info.name, info.vector_bits, info.vector_registers, info.lanes("float32")
    ('haswell', 256, 16, 8)
    >>> cpu_info(targets.Target("llvm", mcpu="skylake-avx512")).lanes("float32")
    16
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache

from cuvil_tir import dtype as D
from cuvil_tir.errors import TargetError

from ..runtime.host import cache_bytes, host_cores, host_cpu, host_features, vector_bits_of
from .engine import resolve_cpu
from .isa import features_in, missing_on_host, probe_ir

#: 64-bit x86 CPU names LLVM 14-20 accepts (for suggestions; the probe decides)
KNOWN_X86_64 = (
    "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "generic", "nocona", "core2",
    "penryn", "bonnell", "atom", "silvermont", "slm", "goldmont", "goldmont-plus",
    "tremont", "nehalem", "corei7", "westmere", "sandybridge", "corei7-avx", "ivybridge",
    "core-avx-i", "haswell", "core-avx2", "broadwell", "skylake", "skylake-avx512", "skx",
    "cascadelake", "cooperlake", "cannonlake", "icelake-client", "rocketlake",
    "icelake-server", "tigerlake", "sapphirerapids", "alderlake", "raptorlake",
    "meteorlake", "graniterapids", "emeraldrapids", "knl", "knm", "k8", "athlon64",
    "athlon-fx", "opteron", "k8-sse3", "athlon64-sse3", "opteron-sse3", "amdfam10",
    "barcelona", "btver1", "btver2", "bdver1", "bdver2", "bdver3", "bdver4", "znver1",
    "znver2", "znver3", "znver4",
)

_PROBE = r'''
import sys, llvmlite.binding as llvm
llvm.initialize_native_target(); llvm.initialize_native_asmprinter()
cpu, feats = sys.argv[1], sys.argv[2]
ir = """
define void @probe(ptr %p) #0 {
  %v = load <16 x float>, ptr %p, align 64
  %w = fadd <16 x float> %v, %v
  store <16 x float> %w, ptr %p, align 64
  ret void
}
attributes #0 = { "min-legal-vector-width"="512" "prefer-vector-width"="512" }
"""
tm = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
    cpu=cpu, features=feats, opt=2)
mod = llvm.parse_assembly(ir)
mod.triple = tm.triple
asm = tm.emit_assembly(mod)
print("VECTOR", 512 if "zmm" in asm else 256 if "ymm" in asm else 128)
isa = llvm.parse_assembly(sys.stdin.read())   # targets.llvm.isa's snippets
isa.triple = tm.triple
print(tm.emit_assembly(isa))
'''


@dataclass(frozen=True)
class CPUInfo:
    """The machine a target compiles for; ``isa``: the instruction-set features its
    code may use (:mod:`targets.llvm.isa`; the host's for ``native``).

    Example::

        >>> CPUInfo("x", ("+avx2",), 256, 16, 32768, 1 << 20, 2).lanes("float64")
        4
    """

    name: str
    features: tuple
    vector_bits: int
    vector_registers: int
    l1d_bytes: int
    l2_bytes: int
    cores: int
    isa: tuple = ()

    def lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one vector register."""
        return max(1, self.vector_bits // D.bits(D.element(dtype)))


@lru_cache(maxsize=None)
def _probe(cpu: str, features: str) -> tuple:
    """``(vector bits, isa features)`` LLVM uses for ``cpu``/``features``; TargetError
    if LLVM refuses them."""
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, cpu, features],
                              input=probe_ir(), capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise TargetError(f"llvm: could not check CPU {cpu!r}: {err}") from None
    bad = [line.strip() for line in proc.stderr.splitlines()
           if "not a recognized" in line or "LLVM ERROR" in line]
    if proc.returncode != 0 or bad:
        why = "; ".join(dict.fromkeys(bad)) or proc.stderr.strip()[-300:]
        close = difflib.get_close_matches(cpu, KNOWN_X86_64, n=4, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise TargetError(f"llvm: LLVM cannot compile for mcpu={cpu!r}"
                          f"{' mattr=' + repr(features) if features else ''} on this "
                          f"{_arch()} host ({why}){hint}. Use mcpu='native', or one of: "
                          f"{', '.join(KNOWN_X86_64)}")
    for line in proc.stdout.splitlines():
        if line.startswith("VECTOR "):
            return int(line.split()[1]), tuple(features_in(proc.stdout))
    raise TargetError(f"llvm: the CPU probe for {cpu!r} printed nothing: {proc.stderr[-300:]}")


def _arch() -> str:
    return os.uname().machine if hasattr(os, "uname") else "this"


def check_cpu(target) -> tuple:
    """``resolve_cpu(target)`` after making sure LLVM accepts it (see the module doc).

    Example::

        >>> import targets
        >>> check_cpu(targets.Target("llvm", mcpu="haswell"))
        ('haswell', '')
    """
    cpu, features = resolve_cpu(target)
    mcpu = target.options.get("mcpu", "native") or "native"
    if mcpu not in ("native", "host") or target.options.get("mattr"):
        _probe(cpu, features)
    return cpu, features


def cpu_info(target) -> CPUInfo:
    """The :class:`CPUInfo` of an llvm (or c) target; the host only for ``native``.

    Target options ``num_cores``, ``l1d_kb`` and ``l2_kb`` pin the machine (for tests
    and for tuning a machine other than this one).

    Example::

        >>> import targets
        >>> cpu_info(targets.Target("llvm", mcpu="x86-64", num_cores=4)).cores
        4
    """
    cpu, features = check_cpu(target)
    mcpu = target.options.get("mcpu", "native") or "native"
    if mcpu in ("native", "host") and not target.options.get("mattr"):
        bits = vector_bits_of(features or host_features())
        cpu = cpu or host_cpu()
        isa = tuple(f[1:] for f in (features or host_features()).split(",")
                    if f.startswith("+"))
    else:
        bits, isa = _probe(cpu, features)
    opts = target.options
    cores = int(opts.get("num_cores") or 0) or host_cores()
    l1 = int(opts.get("l1d_kb") or 0) * 1024 or cache_bytes("1d", 32 << 10)
    l2 = int(opts.get("l2_kb") or 0) * 1024 or cache_bytes("2", 1 << 20)
    regs = 32 if bits == 512 else 16
    feats = tuple(f for f in features.split(",") if f)
    return CPUInfo(cpu, feats, bits, regs, l1, l2, cores, isa)


def missing_host_features(target) -> list:
    """The CPU features the code of ``target`` may use that this host lacks (empty for
    ``native``, or when the host has them all): running that code would stop the
    process with SIGILL.

    Example::

        >>> import targets
        >>> missing_host_features(targets.Target("llvm"))
        []
    """
    mcpu = target.options.get("mcpu", "native") or "native"
    mattr = target.options.get("mattr", "") or ""
    if mcpu in ("native", "host") and not mattr:
        return []
    return missing_on_host(cpu_info(target).isa, mattr, host_features())


def isa_features(cpu: str, features: str) -> frozenset:
    """The instruction-set features (LLVM's names, :mod:`targets.llvm.isa`) code for
    the resolved ``cpu``/``features`` pair (:func:`resolve_cpu`) may use: the host's
    own list for the host's pair, else LLVM's answer for that CPU (probed once).

    Example::

        >>> {"avx512vnni", "avx512bf16"} <= isa_features("znver4", "")
        True
        >>> "avx512vnni" in isa_features("znver4", "-avx512vnni")
        False
    """
    if (cpu, features) == (host_cpu(), host_features()):
        return frozenset(f[1:] for f in features.split(",") if f.startswith("+"))
    return frozenset(_probe(cpu, features)[1])
