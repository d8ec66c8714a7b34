"""The system C compiler: C source -> a loaded shared library, cached per process (what
every C-family backend compiles with: ``c``, the accelerator simulators, the CUDA host
program).

``compile_shared(source, cc, cflags, openmp)`` writes the source into this process's
temporary directory, runs ``cc <cflags> -std=c99 -fPIC -shared [-fopenmp]``
and loads the result with ctypes.  The same source, compiler and flags compile once per
process (the library is keyed by a SHA-256 of all of them).  A compiler error is a
:class:`~cuvil_tir.errors.CodegenError` quoting the failing line of the source; a
missing compiler is a :class:`~cuvil_tir.errors.TargetError`.

The printed C needs no flag for the IR's wrapping arithmetic (see
:mod:`targets.cstyle.printer`).

Example::

    >>> lib = compile_shared("int answer(void) { return 42; }\\n", "cc", "-O1")
    >>> lib.answer()
    42
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading

from cuvil_tir.errors import CodegenError, TargetError

_LOCK = threading.Lock()
_LIBS: dict[str, ctypes.CDLL] = {}
_OPENMP: dict[tuple, bool] = {}
_DIR: list[str] = []

#: flags every compile gets (after the user's ``cflags``)
REQUIRED_FLAGS = ("-std=c99", "-fPIC", "-shared")


def _workdir() -> str:
    if not _DIR:
        d = tempfile.mkdtemp(prefix="cuvil-c-")
        atexit.register(shutil.rmtree, d, True)
        _DIR.append(d)
    return _DIR[0]


def _run(cmd: list, cc: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise TargetError(f"c: no C compiler {cc!r} found on PATH; install one (gcc or "
                          "clang) or name it with Target('c', cc='gcc')") from None
    except subprocess.TimeoutExpired:
        raise CodegenError(f"c: the C compiler {cc!r} ran for more than 300 s") from None


def openmp_supported(cc: str = "cc") -> bool:
    """True when ``cc`` compiles and links an OpenMP program (``-fopenmp``).

    Example::

        >>> isinstance(openmp_supported("cc"), bool)
        True
    """
    key = (cc,)
    with _LOCK:
        if key in _OPENMP:
            return _OPENMP[key]
    path = os.path.join(_workdir(), "omp_probe.c")
    with open(path, "w") as fh:
        fh.write("#include <omp.h>\nint cvl_probe(void) { int n = 0;\n"
                 "#pragma omp parallel for reduction(+:n)\n"
                 "for (int i = 0; i < 4; ++i) n += omp_get_num_threads() > 0;\n"
                 "return n; }\n")
    try:
        r = _run([*shlex.split(cc), *REQUIRED_FLAGS, "-fopenmp", "-o", path + ".so", path],
                 cc)
        ok = r.returncode == 0
    except TargetError:
        ok = False
    with _LOCK:
        _OPENMP[key] = ok
    return ok


def compile_shared(source: str, cc: str = "cc", cflags: str = "-O3",
                   openmp: bool = False) -> ctypes.CDLL:
    """Compile ``source`` into a shared library and load it (cached per process).

    Example::

        >>> compile_shared("int f(int x) { return x + 1; }\\n", "cc", "-O1").f(2)
        3
    """
    flags = [*shlex.split(cflags or ""), *REQUIRED_FLAGS] + (["-fopenmp"] if openmp else [])
    key = hashlib.sha256("\0".join([source, cc, *flags]).encode()).hexdigest()
    with _LOCK:
        lib = _LIBS.get(key)
    if lib is not None:
        return lib
    base = os.path.join(_workdir(), key[:24])
    with open(base + ".c", "w") as fh:
        fh.write(source)
    r = _run([*shlex.split(cc), *flags, "-o", base + ".so", base + ".c", "-lm"], cc)
    if r.returncode != 0:
        raise compile_error(source, r.stderr or r.stdout, cc)
    lib = _load(base + ".so")
    with _LOCK:
        _LIBS[key] = lib
        # load_shared of this library's bytes (the program's binary) opens it again
        # only in another process
        _LIBS[_content_key(library_bytes(lib))] = lib
    return lib


def _content_key(blob: bytes) -> str:
    return "so:" + hashlib.sha256(blob).hexdigest()


def _load(path: str) -> ctypes.CDLL:
    # dlopen resolves every symbol now (ctypes' default RTLD_NOW): an extern nothing
    # defines is refused here, at build time, not when the call is reached
    try:
        return ctypes.CDLL(path)
    except OSError as err:
        found = re.search(r"undefined symbol: (\S+)", str(err))
        what = f"the external function {found.group(1)!r}" if found else "a symbol"
        raise CodegenError(
            f"c: the compiled library calls {what}, which no library loaded into this "
            f"process defines (expected every T.call_extern to name a defined function; "
            f"the loader said: {err}); load the library that defines it first, "
            "with ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), or build for a target that "
            "provides it") from None


def library_bytes(lib: ctypes.CDLL) -> bytes:
    """The shared library file behind ``lib`` (for the compile cache).

    Example::

        >>> library_bytes(compile_shared("int g(void) { return 1; }\\n", "cc", "-O1"))[:4]
        b'\\x7fELF'
    """
    with open(lib._name, "rb") as fh:
        return fh.read()


def load_shared(blob: bytes) -> ctypes.CDLL:
    """Load a shared library from its bytes (a compile-cache entry), once per content.

    Example::

        >>> lib = compile_shared("int h(void) { return 7; }\\n", "cc", "-O1")
        >>> load_shared(library_bytes(lib)).h()
        7
    """
    key = _content_key(blob)
    with _LOCK:
        lib = _LIBS.get(key)
    if lib is not None:
        return lib
    path = os.path.join(_workdir(), key[3:27] + ".cached.so")
    with open(path, "wb") as fh:
        fh.write(blob)
    lib = _load(path)
    with _LOCK:
        _LIBS[key] = lib
    return lib


def compiler_identity(cc: str) -> str:
    """The first line of ``cc --version`` (part of the compile-cache key).

    Example::

        >>> isinstance(compiler_identity("cc"), str)
        True
    """
    key = ("version", cc)
    with _LOCK:
        if key in _OPENMP:
            return _OPENMP[key]
    r = _run([*shlex.split(cc), "--version"], cc)
    text = (r.stdout or r.stderr).strip().splitlines()
    ident = text[0] if text else ""
    with _LOCK:
        _OPENMP[key] = ident
    return ident


_DIAG = re.compile(r"^[^:\n]*\.c:(\d+):(?:(\d+):)?\s*(?:fatal )?error:\s*(.*)$", re.M)


def compile_error(source: str, stderr: str, cc: str = "cc") -> CodegenError:
    """The error for a failed compile: the first error's line, its text and message.

    Example::

        >>> err = compile_error("int f(void) {\\n  return x;\\n}\\n",
        ...                     "k.c:2:10: error: 'x' undeclared")
        >>> print(err.message.splitlines()[1])
            2 |   return x;
    """
    m = _DIAG.search(stderr)
    if m is None:
        tail = "\n".join(stderr.strip().splitlines()[-8:])
        return CodegenError(f"c: the C compiler {cc!r} failed on the generated source:\n"
                            f"{tail}")
    line = int(m.group(1))
    lines = source.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return CodegenError(f"c: the C compiler {cc!r} rejected line {line} of the generated "
                        f"source: {m.group(3)}\n{line:5d} | {text}")
