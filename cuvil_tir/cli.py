"""The ``cuvil`` command: show, lower, build and run kernels from files.

A FILE is either the text form (``*.tir``, as ``print(func)`` writes it) or a Python
file defining one or more ``@T.prim_func`` kernels (``*.py``); ``--func NAME`` picks one
when there are several.

Example::

    $ cuvil show kernel.py
    $ cuvil lower kernel.tir --target llvm
    $ cuvil build kernel.py --target llvm --emit asm -o kernel.s
    $ cuvil run kernel.py --target llvm --random-inputs

Every subcommand accepts ``--pass-timing`` and ``--dump-ir DIR``; on bad input the
command exits with status 1 and prints the error's code and message.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import runpy
import sys

from .errors import CuvilError, ParseError, TargetError
from .function import PrimFunc

_EMIT_FORMATS = ("ll", "asm", "obj", "c", "cuda", "ptx", "host", "tir")


def load_funcs(path: str) -> dict[str, PrimFunc]:
    """The PrimFuncs defined in a ``.py`` file (module-level) or a text-form file.

    Example::

        >>> import os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "k.tir")
        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> _ = open(p, "w").write(str(T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])))
        >>> list(load_funcs(p))
        ['main']
    """
    if path.endswith(".py"):
        try:
            ns = runpy.run_path(path, run_name="__cuvil_kernel__")
        except CuvilError:
            raise
        except Exception as err:  # the user's module failed to import: say where
            raise ParseError(f"could not load {path}: {type(err).__name__}: {err}") from err
        funcs = {v.name if v.name != "main" else k: v for k, v in ns.items()
                 if isinstance(v, PrimFunc)}
        if not funcs:
            raise ParseError(f"{path} defines no @T.prim_func at module level")
        return funcs
    from .parser import parse
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    func = parse(text, filename=path)
    return {func.name: func}


def _pick(funcs: dict, name: str | None, path: str) -> PrimFunc:
    if name is not None:
        if name not in funcs:
            raise ParseError(f"{path} has no function {name!r}; it defines {sorted(funcs)}")
        return funcs[name]
    if len(funcs) > 1:
        raise ParseError(f"{path} defines several functions {sorted(funcs)}; choose one "
                         "with --func NAME")
    return next(iter(funcs.values()))


def _targets():
    if importlib.util.find_spec("targets") is None:
        raise TargetError("the 'targets' package is not installed; reinstall cuvil")
    import targets
    return targets


@contextlib.contextmanager
def _instrumented(args):
    from . import transform
    instruments = []
    timing = None
    if args.pass_timing:
        timing = transform.PassTiming()
        instruments.append(timing)
    if args.dump_ir:
        instruments.append(transform.DumpIR(args.dump_ir))
    if not instruments:
        yield
        return
    with transform.PassContext(instruments=instruments):
        yield
    if timing is not None:
        print(timing.table(), file=sys.stderr)


def cmd_show(args) -> int:
    from .transform import verify_well_formed
    func = _pick(load_funcs(args.file), args.func, args.file)
    verify_well_formed(func)
    print(func)
    return 0


def cmd_lower(args) -> int:
    from .transform import lower
    func = _pick(load_funcs(args.file), args.func, args.file)
    target = args.target
    if target is not None:
        _targets()  # registers the backends' pipelines
    with _instrumented(args):
        lowered = lower(func, target)
    print(lowered)
    return 0


def cmd_build(args) -> int:
    tg = _targets()
    func = _pick(load_funcs(args.file), args.func, args.file)
    with _instrumented(args):
        mod = tg.build(func, args.target)
    fmt = args.emit
    if fmt == "obj":
        data = mod.get_source("obj")
        if args.output in (None, "-"):
            raise TargetError("--emit obj writes binary data; give an output file with -o")
        with open(args.output, "wb") as fh:
            fh.write(data)
        return 0
    text = mod.get_source(fmt)
    if args.output in (None, "-"):
        print(text)
    else:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


def cmd_run(args) -> int:
    import numpy as np
    tg = _targets()
    from . import dtype as D
    func = _pick(load_funcs(args.file), args.func, args.file)
    if not args.random_inputs:
        raise TargetError("cuvil run needs --random-inputs (inputs from files are not "
                          "supported yet)")
    with _instrumented(args):
        mod = tg.build(func, args.target)
    rng = np.random.default_rng(args.seed)
    arrays = []
    sizes: dict = {}
    for p in func.params:
        if not hasattr(p, "shape"):
            raise TargetError(f"cuvil run: scalar parameter {p.name!r} needs a value; "
                              "only buffer parameters are supported with --random-inputs")
        shape = []
        for s in p.shape:
            if hasattr(s, "value"):
                shape.append(int(s.value))
            else:
                shape.append(sizes.setdefault(s.name, args.size))
        npdt = D.to_numpy(p.dtype)
        if D.is_float(p.dtype) and p.dtype != "bfloat16":
            arr = rng.standard_normal(shape).astype(npdt)
        else:
            arr = rng.integers(0, 8, size=shape).astype(npdt)
        arrays.append(arr)
    mod(*arrays)
    stats = mod.benchmark(*arrays, repeat=args.repeat)
    for p, arr in zip(func.params, arrays):
        print(f"{p.name:>12} {str(arr.shape):>16} {arr.dtype!s:>8} "
              f"checksum={float(np.asarray(arr, dtype='float64').sum()):.6g}")
    print(f"time: median {stats.median * 1e3:.4f} ms over {args.repeat} repeats")
    return 0


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``cuvil`` command.

    Example::

        >>> make_parser().parse_args(["show", "k.tir"]).command
        'show'
    """
    p = argparse.ArgumentParser(prog="cuvil", description="Cuvil tensor compiler: show, "
                                "lower, build and run kernels written in the text form "
                                "or with @T.prim_func.")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp):
        sp.add_argument("file", help="a .tir text file or a .py file with @T.prim_func")
        sp.add_argument("--func", help="which function, when the file defines several")
        sp.add_argument("--pass-timing", action="store_true",
                        help="print a table of per-pass times to stderr")
        sp.add_argument("--dump-ir", metavar="DIR",
                        help="write the IR before/after every pass into DIR")

    sp = sub.add_parser("show", help="parse, verify and pretty-print")
    common(sp)
    sp.set_defaults(fn=cmd_show)
    sp = sub.add_parser("lower", help="print the IR after the target's lowering passes")
    common(sp)
    sp.add_argument("--target", default=None, help="target name (default: generic passes)")
    sp.set_defaults(fn=cmd_lower)
    sp = sub.add_parser("build", help="compile and write the generated code")
    common(sp)
    sp.add_argument("--target", default="llvm")
    sp.add_argument("--emit", default="ll", choices=_EMIT_FORMATS)
    sp.add_argument("-o", "--output", default=None, help="output file (default: stdout)")
    sp.set_defaults(fn=cmd_build)
    sp = sub.add_parser("run", help="build, run on random inputs, print checksums, time")
    common(sp)
    sp.add_argument("--target", default="llvm")
    sp.add_argument("--random-inputs", action="store_true",
                    help="fill every argument with random values")
    sp.add_argument("--size", type=int, default=64, help="value of each symbolic size")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--repeat", type=int, default=5)
    sp.set_defaults(fn=cmd_run)
    return p


def main(argv=None) -> int:
    """Entry point of the ``cuvil`` console script.

    Example::

        >>> main(["show", "/nonexistent.tir"])
        1
    """
    args = make_parser().parse_args(argv)
    try:
        return args.fn(args)
    except CuvilError as err:
        print(f"cuvil: error {err.code}: {err.message}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"cuvil: error: {err}", file=sys.stderr)
        return 1


