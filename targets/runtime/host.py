"""The host machine, as the CPU backends need it: the CPU's name and features as LLVM
names them, its vector width, caches and cores.

``llvm`` reads it for ``mcpu="native"``; ``c`` (whose compiler targets this host, and
whose ``cflags`` may say ``-march=native``) keys its cache on it and sizes the tuner's
space with it.  LLVM (llvmlite) is the one authority on CPU names and features here.

Example::

    >>> m = host_machine()
    >>> m.vector_bits in (128, 256, 512) and m.cores >= 1 and m.name == host_cpu()
    True
"""

from __future__ import annotations

import ctypes.util
import os
from functools import lru_cache

import llvmlite.binding as llvm

from cuvil_tir.target import Machine


@lru_cache(maxsize=None)
def init_llvm() -> None:
    """Initialise LLVM's native target once per process (and make libm and libc
    symbols visible to code it compiles).

    Example::

        >>> init_llvm()
    """
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for name in ("m", "c"):
        path = ctypes.util.find_library(name)
        if path:
            llvm.load_library_permanently(path)


def host_cpu() -> str:
    """The host CPU name as LLVM knows it (``znver3`` …).

    Example::

        >>> isinstance(host_cpu(), str)
        True
    """
    init_llvm()
    return llvm.get_host_cpu_name()


@lru_cache(maxsize=None)
def host_features() -> str:
    """The host's enabled CPU features, ``+avx2,+fma,…`` (disabled ones left out).

    Example::

        >>> "+" in host_features() or host_features() == ""
        True
    """
    init_llvm()
    feats = llvm.get_host_cpu_features()
    return ",".join(f"+{k}" for k, on in sorted(feats.items()) if on)


def vector_bits_of(features: str) -> int:
    """Vector register bits a CPU with ``features`` has: 512 with AVX-512, 256 with
    AVX, else 128.

    Example::

        >>> vector_bits_of("+avx,+avx2"), vector_bits_of("+sse4.2")
        (256, 128)
    """
    feats = features.split(",")
    if "+avx512f" in feats:
        return 512
    return 256 if "+avx" in feats else 128


def cache_bytes(level: str, default: int) -> int:
    """The host's cache of ``level`` ('1d' or '2') from sysfs, else ``default``.

    Example::

        >>> cache_bytes("2", 1 << 20) > 0
        True
    """
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            path = os.path.join(base, entry)
            with open(os.path.join(path, "level")) as f:
                lvl = f.read().strip()
            with open(os.path.join(path, "type")) as f:
                kind = f.read().strip()
            if (level == "1d" and lvl == "1" and kind == "Data") or \
                    (level == "2" and lvl == "2"):
                with open(os.path.join(path, "size")) as f:
                    text = f.read().strip().upper()
                mult = {"K": 1024, "M": 1 << 20}.get(text[-1:], 1)
                return int(text.rstrip("KM")) * mult
    except (OSError, ValueError):
        pass
    return default


def host_cores() -> int:
    """The cores of this host (``os.cpu_count()``), never this process's affinity:
    the affinity is the process's state, which ``taskset`` or a scheduler may change
    while it runs, and the tuner's space reads the cores (how many parallel tiles), so
    a draw replayed in another process, or later in this one, would build other IR.
    Name fewer cores with the target's ``num_cores``.

    Example::

        >>> host_cores() == (os.cpu_count() or 1)
        True
    """
    return os.cpu_count() or 1


def host_machine() -> Machine:
    """This host as a :class:`~cuvil_tir.target.Machine` (32 vector registers with
    AVX-512, else 16)."""
    bits = vector_bits_of(host_features())
    return Machine(bits, 32 if bits == 512 else 16, cache_bytes("1d", 32 << 10),
                   cache_bytes("2", 1 << 20), host_cores(), host_cpu(),
                   tuple(f for f in host_features().split(",") if f))


__all__ = ["cache_bytes", "host_cores", "host_cpu", "host_features", "host_machine",
           "init_llvm", "vector_bits_of"]
