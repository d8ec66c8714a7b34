"""PTX through ``nvcc`` (``get_source("ptx")``, ``cuvil build --emit ptx``, the tests).

``nvcc_ptx(source, arch)`` compiles CUDA C to PTX, ``nvcc_compile(source, arch,
"cubin")`` to machine code (what a module built for ``sm_90a`` loads), warnings as
errors, each kept in memory by (source, arch): the tests compile each group of kernels
once per architecture.  ``resource_usage`` reads ``ptxas -v`` (registers, spills,
shared memory per kernel) and ``sass`` the machine code (``cuobjdump -sass``), which
the tests assert on.  ``nvcc_available()`` says whether ``nvcc`` is on the PATH (or
``$CUDA_HOME/bin``).  A compile error becomes a :class:`CodegenError` quoting the
offending line of the generated source.

Example::

    >>> ptx = nvcc_ptx('extern "C" __global__ void k(float* a) { a[0] = 1.0f; }', "sm_80") \\
    ...     if nvcc_available() else ".visible .entry k("
    >>> ".visible .entry k(" in ptx
    True
"""

from __future__ import annotations

import glob
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


def needs_nvcc(arch: str) -> bool:
    """Whether kernels for ``arch`` are compiled by ``nvcc`` rather than NVRTC: the
    architecture-specific targets (``sm_90a``: ``wgmma``, ``setmaxnreg``), whose cubin
    the build keeps (NVRTC through cupy compiles for the plain architecture).

    Example::

        >>> needs_nvcc("sm_90a"), needs_nvcc("sm_80")
        (True, False)
    """
    return str(arch).endswith("a")


def arch_flags(arch: str, fmt: str) -> list:
    """nvcc's architecture flags: ``-gencode`` for architecture-specific targets (the
    ``-arch=sm_90a`` shorthand also runs a plain sm_90 pass that rejects them).

    Example::

        >>> arch_flags("sm_90a", "cubin")
        ['-gencode=arch=compute_90a,code=sm_90a']
        >>> arch_flags("sm_80", "ptx")
        ['-arch=sm_80']
    """
    if not re.fullmatch(r"sm_\d+a?", str(arch)):
        raise TargetError(f"cuda: unknown architecture {arch!r}; expected e.g. sm_80, sm_90, "
                          "sm_90a")
    if fmt == "cubin" or needs_nvcc(arch):
        num = arch.removeprefix("sm_")
        return [f"-gencode=arch=compute_{num},code=sm_{num}"]
    return [f"-arch={arch}"]


def _run_nvcc(source: str, arch: str, fmt: str, extra: tuple = ()) -> tuple:
    exe = nvcc_path()
    if exe is None:
        raise TargetError("nvcc is not on this machine: install the CUDA toolkit (or set "
                          "CUDA_HOME) to emit PTX or a cubin; the CUDA C itself is "
                          "mod.get_source('cuda')")
    flags = arch_flags(arch, fmt)
    with tempfile.TemporaryDirectory(prefix="cuvil-nvcc-") as tmp:
        src = os.path.join(tmp, "kernel.cu")
        out = os.path.join(tmp, "kernel." + fmt)
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(source)
        cmd = [exe, f"-{fmt}", *flags, "-std=c++17", "-Werror", "all-warnings", *extra,
               "-o", out, src]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                              check=False)
        log = proc.stderr + proc.stdout
        if proc.returncode != 0 or re.search(r"warning", proc.stderr, re.I):
            raise source_error(log, source, "nvcc")
        with open(out, "rb") as fh:
            data = fh.read()
    return data, log


def nvcc_compile(source: str, arch: str = "sm_80", fmt: str = "cubin") -> bytes:
    """``source`` compiled by nvcc for ``arch`` to ``fmt`` (``"cubin"`` or ``"ptx"``),
    warnings as errors, kept in memory by (source, arch, format).

    Example::

        >>> nvcc_compile.__name__
        'nvcc_compile'
    """
    key = (source, arch, fmt)
    if key not in _CACHE:
        _CACHE[key] = _run_nvcc(source, arch, fmt)[0]
    return _CACHE[key]


def nvcc_ptx(source: str, arch: str = "sm_80") -> str:
    """PTX of ``source`` for ``arch`` (``sm_80``, ``sm_90``, ``sm_90a`` …), warnings as
    errors.

    Example::

        >>> nvcc_ptx.__name__
        'nvcc_ptx'
    """
    return nvcc_compile(source, arch, "ptx").decode()


_USAGE = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'|"
                    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads|"
                    r"Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")


def resource_usage(source: str, arch: str = "sm_80") -> dict:
    """What ``ptxas -v`` reports per kernel of ``source`` for ``arch``:
    ``{kernel: {"registers", "shared", "stack", "spill_stores", "spill_loads"}}`` (bytes
    but for registers; ``shared`` is the kernel's static shared memory).

    Example::

        >>> src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }'
        >>> resource_usage(src, "sm_80")["k"]["spill_stores"] if nvcc_available() else 0
        0
    """
    key = (source, arch, "usage")
    if key in _CACHE:
        return _CACHE[key]
    _, log = _run_nvcc(source, arch, "cubin", ("-Xptxas", "-v"))
    out, cur = {}, None
    for m in _USAGE.finditer(log):
        if m.group(1):
            cur = out.setdefault(m.group(1), {"registers": 0, "shared": 0, "stack": 0,
                                              "spill_stores": 0, "spill_loads": 0})
        elif m.group(3) and cur is not None:
            cur.update(stack=int(m.group(3)), spill_stores=int(m.group(4)),
                       spill_loads=int(m.group(5)))
        elif m.group(6) and cur is not None:
            cur.update(registers=int(m.group(6)), shared=int(m.group(7) or 0))
    _CACHE[key] = out
    return out


def cuobjdump_path() -> str | None:
    """``cuobjdump``: on the PATH, beside nvcc, or from the ``nvidia-cuda-cuobjdump``
    wheel (the test extras install it).

    Example::

        >>> cuobjdump_path() is None or "cuobjdump" in cuobjdump_path()
        True
    """
    found = shutil.which("cuobjdump")
    if found:
        return found
    exe = nvcc_path()
    cands = [os.path.join(os.path.dirname(exe), "cuobjdump")] if exe else []
    try:
        import nvidia                       # the wheel installs nvidia/cu13/bin/cuobjdump
        for root in nvidia.__path__:
            cands += sorted(glob.glob(os.path.join(root, "*", "bin", "cuobjdump")))
    except ImportError:
        pass
    return next((c for c in cands if os.access(c, os.X_OK)), None)


def sass(source: str, arch: str = "sm_80") -> dict:
    """The machine code (SASS) of each kernel of ``source`` compiled for ``arch``:
    ``{kernel: text}`` (``cuobjdump -sass`` of the cubin).

    Example::

        >>> sass.__name__
        'sass'
    """
    key = (source, arch, "sass")
    if key in _CACHE:
        return _CACHE[key]
    tool = cuobjdump_path()
    if tool is None:
        raise TargetError("cuobjdump is not on this machine: pip install "
                          "nvidia-cuda-cuobjdump (in the test extras), or install the CUDA "
                          "toolkit's binary utilities")
    cubin = nvcc_compile(source, arch, "cubin")
    with tempfile.TemporaryDirectory(prefix="cuvil-sass-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as fh:
            fh.write(cubin)
        env = dict(os.environ)            # cuobjdump runs nvdisasm, beside it in the wheel
        env["PATH"] = os.path.dirname(tool) + os.pathsep + env.get("PATH", "")
        proc = subprocess.run([tool, "-sass", path], capture_output=True, text=True,
                              timeout=300, check=False, env=env)
    if proc.returncode != 0:
        raise TargetError(f"cuobjdump failed on the cubin of {arch}: {proc.stderr.strip()[:500]}")
    out, name = {}, None
    for line in proc.stdout.splitlines():
        m = re.match(r"\s*Function : (\w+)", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name is not None:
            out[name].append(line)
    result = {k: "\n".join(v) for k, v in out.items()}
    _CACHE[key] = result
    return result


__all__ = ["arch_flags", "cuobjdump_path", "needs_nvcc", "nvcc_available", "nvcc_compile",
           "nvcc_path", "nvcc_ptx", "resource_usage", "sass", "source_error"]
