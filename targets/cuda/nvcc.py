"""PTX through ``nvcc`` (``get_source("ptx")``, ``cuvil build --emit ptx``, the tests).

``nvcc_ptx(source, arch)`` compiles CUDA C to PTX, warnings as errors, and keeps the
result in memory by (source, arch): the tests compile each group of kernels once per
architecture.  ``nvcc_available()`` says whether ``nvcc`` is on the PATH (or
``$CUDA_HOME/bin``).  A compile error becomes a :class:`CodegenError` quoting the
offending line of the generated source.

Example::

    >>> ptx = nvcc_ptx('extern "C" __global__ void k(float* a) { a[0] = 1.0f; }', "sm_80") \\
    ...     if nvcc_available() else ".visible .entry k("
    >>> ".visible .entry k(" in ptx
    True
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

from cuvil_tir.errors import CodegenError, TargetError

_CACHE: dict = {}


def nvcc_path() -> str | None:
    """The ``nvcc`` executable, or None.

    Example::

        >>> nvcc_path() is None or nvcc_path().endswith("nvcc")
        True
    """
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    cand = os.path.join(home, "bin", "nvcc") if home else None
    return cand if cand and os.access(cand, os.X_OK) else None


def nvcc_available() -> bool:
    """Whether PTX can be produced on this machine.

    Example::

        >>> isinstance(nvcc_available(), bool)
        True
    """
    return nvcc_path() is not None


def source_error(log: str, source: str, tool: str) -> CodegenError:
    """A ``CodegenError`` from a compiler log, quoting the first offending line.

    Example::

        >>> err = source_error("kernel.cu(2): error: identifier x is undefined", "a\\nb = x;", "nvcc")
        >>> "line 2: b = x;" in str(err)
        True
    """
    lines = source.splitlines()
    quote = ""
    m = re.search(r"\((\d+)\): (?:error|warning)", log)
    if m:
        n = int(m.group(1))
        if 1 <= n <= len(lines):
            quote = f"\nline {n}: {lines[n - 1].strip()}"
    return CodegenError(f"{tool} rejected the generated CUDA C (a code generator bug: "
                        f"please report it with this message):{quote}\n{log.strip()[:2000]}")


def nvcc_ptx(source: str, arch: str = "sm_80") -> str:
    """PTX of ``source`` for ``arch`` (``sm_80``, ``sm_90`` …), warnings as errors.

    Example::

        >>> nvcc_ptx.__name__
        'nvcc_ptx'
    """
    key = (source, arch)
    if key in _CACHE:
        return _CACHE[key]
    exe = nvcc_path()
    if exe is None:
        raise TargetError("nvcc is not on this machine: install the CUDA toolkit (or set "
                          "CUDA_HOME) to emit PTX; the CUDA C itself is "
                          "mod.get_source('cuda')")
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise TargetError(f"cuda: unknown architecture {arch!r}; expected e.g. sm_80, sm_90")
    with tempfile.TemporaryDirectory(prefix="cuvil-nvcc-") as tmp:
        src = os.path.join(tmp, "kernel.cu")
        out = os.path.join(tmp, "kernel.ptx")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(source)
        cmd = [exe, "-ptx", f"-arch={arch}", "-std=c++17", "-Werror", "all-warnings",
               "-o", out, src]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              check=False)
        if proc.returncode != 0 or "warning" in proc.stderr:
            raise source_error(proc.stderr + proc.stdout, source, "nvcc")
        with open(out, encoding="utf-8") as fh:
            ptx = fh.read()
    _CACHE[key] = ptx
    return ptx


__all__ = ["nvcc_available", "nvcc_path", "nvcc_ptx", "source_error"]
