"""The ``cuvil`` command: show, lower, build and run kernels from files.

A FILE is either the text form (``*.tir``, as ``print(func)`` writes it) or a Python
file defining one or more ``@T.prim_func`` kernels (``*.py``); ``--func NAME`` picks one
when there are several.

Example::

    $ cuvil show kernel.py
    $ cuvil lower kernel.tir --target llvm
    $ cuvil build kernel.py --target llvm --emit asm -o kernel.s
    $ cuvil build kernel.py --target c --emit c
    $ cuvil run kernel.py --target llvm
    $ cuvil tune kernel.py --target llvm --trials 64 --db tune.jsonl [--resume]
    $ cuvil tune bert-base --trials 2000 --minutes 60 --db bert.jsonl [--resume]

``--emit`` takes one of the target's source formats (``Module.source_formats``:
``ll``, ``ll-opt``, ``asm`` for ``llvm``, ``c`` for ``c``) or ``tir`` (the lowered IR);
the default is the target's first format.  ``cuvil run`` fills every buffer with
random values (``--seed``; each symbolic size is ``--size``).

Every subcommand accepts ``--pass-timing`` and ``--dump-ir DIR``; on bad input the
command exits with status 1 and prints the error's code and message.  When the reader
of its output goes away (``cuvil show k.py | head``) it stops quietly.  The command
lives in the top layer (:mod:`targets.toolkit`): it uses the language, the schedules'
tuner and the backends together; ``python -m targets.toolkit`` runs it too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import sys

import numpy as np

import targets
from cuvil_tir import dtype as D
from cuvil_tir import transform
from cuvil_tir.errors import CuvilError, ParseError, TargetError
from cuvil_tir.expr import IntImm
from cuvil_tir.function import PrimFunc
from cuvil_tir.parser import parse
from cuvil_tir.target import lower
from cuvil_tir.transform import verify_well_formed
from schedules.tune.command import is_task_list, tune_function, tune_tasks


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
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError as err:
        raise ParseError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}); "
                         "expected the text form of a function (.tir) or a .py file") from None
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


@contextlib.contextmanager
def _instrumented(args):
    instruments = []
    timing = None
    if args.pass_timing:
        timing = transform.PassTiming()
        instruments.append(timing)
    if args.dump_ir:
        instruments.append(transform.DumpIR(args.dump_ir))
    if getattr(args, "dump_on_fail", None):
        instruments.append(transform.DumpOnFail(args.dump_on_fail))
    if not instruments:
        yield
        return
    with transform.PassContext(instruments=instruments):
        yield
    if timing is not None:
        print(timing.table(), file=sys.stderr)


def cmd_show(args) -> int:
    func = _pick(load_funcs(args.file), args.func, args.file)
    verify_well_formed(func)
    print(func)
    return 0


def cmd_lower(args) -> int:
    func = _pick(load_funcs(args.file), args.func, args.file)
    with _instrumented(args):
        lowered = lower(func, args.target)
    print(lowered)
    return 0


def cmd_build(args) -> int:
    func = _pick(load_funcs(args.file), args.func, args.file)
    with _instrumented(args):
        mod = targets.build(func, args.target)
    formats = tuple(mod.source_formats)
    fmt = args.emit or formats[0]
    if fmt not in formats:
        raise TargetError(f"--emit {fmt}: target {args.target!r} has no source format "
                          f"{fmt!r}; it offers {', '.join(formats)}")
    text = mod.get_source(fmt)
    if isinstance(text, (bytes, bytearray)):
        if args.output in (None, "-"):
            raise TargetError(f"--emit {fmt} writes binary data; give an output file "
                              "with -o")
        with open(args.output, "wb") as fh:
            fh.write(text)
        return 0
    if args.output in (None, "-"):
        print(text)
    else:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


def random_arguments(func: PrimFunc, seed: int = 0, size: int = 64) -> list:
    """Random arrays for every buffer parameter of ``func``: floats standard normal,
    integers in ``[0, 8)``, bools 0/1; each symbolic size is ``size``.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> f = T.create_prim_func([T.placeholder((n, 2), "int8", name="A")])
        >>> [(a.shape, str(a.dtype)) for a in random_arguments(f, size=3)]
        [((3, 2), 'int8')]
    """
    rng = np.random.default_rng(seed)
    arrays = []
    for p in func.params:
        if not hasattr(p, "shape"):
            raise TargetError(f"cuvil run: scalar parameter {p.name!r} needs a value, and "
                              "the command line cannot give one yet; make it a buffer, or "
                              "call the built module from Python")
        if size < 0:
            raise TargetError(f"cuvil run: --size must be >= 0, found {size}")
        shape = [int(s.value) if isinstance(s, IntImm) else size for s in p.shape]
        if not all(isinstance(s, IntImm) or hasattr(s, "name") for s in p.shape):
            raise TargetError(f"cuvil run: buffer {p.name!r} has a computed size "
                              f"{[str(s) for s in p.shape]}; only constants and size "
                              "variables are supported")
        npdt = D.to_numpy(p.dtype)
        if D.is_float(p.dtype) and p.dtype != "bfloat16":
            arr = rng.standard_normal(shape).astype(npdt)
        elif D.is_bool(p.dtype):
            arr = rng.integers(0, 2, size=shape).astype(bool)
        else:
            arr = rng.integers(0, 8, size=shape).astype(npdt)
        arrays.append(arr)
    return arrays


def cmd_run(args) -> int:
    func = _pick(load_funcs(args.file), args.func, args.file)
    arrays = random_arguments(func, args.seed, args.size)
    with _instrumented(args):
        mod = targets.build(func, args.target)
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
        sp.add_argument("--dump-on-fail", metavar="DIR",
                        help="when a pass or the code generator fails, write the IR it "
                        "was given into DIR (the error names the file)")

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
    sp.add_argument("--emit", default=None, metavar="FORMAT",
                    help="one of the target's source formats (llvm: ll, ll-opt, asm; c: c) "
                    "or tir, the lowered IR; default: the target's first format")
    sp.add_argument("-o", "--output", default=None, help="output file (default: stdout)")
    sp.set_defaults(fn=cmd_build)
    sp = sub.add_parser("run", help="build, run on random inputs, print checksums, time")
    common(sp)
    sp.add_argument("--target", default="llvm")
    sp.add_argument("--random-inputs", action="store_true",
                    help="fill every argument with random values (the default; kept for "
                    "scripts that pass it)")
    sp.add_argument("--size", type=int, default=64, help="value of each symbolic size")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--repeat", type=int, default=5)
    sp.set_defaults(fn=cmd_run)
    sp = sub.add_parser("tune", help="tune the function's schedule for the target "
                        "(generated space; records in a resumable database)")
    common(sp)
    sp.add_argument("--target", default="llvm")
    sp.add_argument("--trials", type=int, default=64,
                    help="measured candidates the database should hold for this function")
    sp.add_argument("--db", default="tune.jsonl", help="the records database (JSON lines)")
    sp.add_argument("--resume", action="store_true",
                    help="continue the run recorded in --db (nothing is measured twice)")
    sp.add_argument("--plot", metavar="PNG", default=None,
                    help="write the best-so-far curve as a PNG (needs cuvil[plot])")
    sp.add_argument("--timeout", type=float, default=10.0,
                    help="seconds one candidate may take to build and run")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--minutes", type=float, default=None,
                    help="a task list's time budget (FILE: resnet18, bert-base, "
                    "bert-base-int8 or a JSON task list; --trials is then the total)")
    sp.set_defaults(fn=cmd_tune)
    sp = sub.add_parser("cache", help="the compile cache: info (location, entries, "
                        "size) or clear")
    sp.add_argument("action", choices=("info", "clear"))
    sp.set_defaults(fn=cmd_cache)
    return p


def cmd_tune(args) -> int:
    """``cuvil tune``: the function of the file tuned with a database that resumes
    (:func:`schedules.tune.command.tune_function`).

    Example::

        >>> make_parser().parse_args(["tune", "k.py", "--trials", "4"]).trials
        4
    """
    if is_task_list(args.file):   # a network: its task list, one budget, one report
        return tune_tasks(args.file, args.target, args.trials, args.db, args.resume,
                          args.minutes, args.timeout, args.seed)
    func = _pick(load_funcs(args.file), args.func, args.file)
    return tune_function(func, args.target, args.trials, args.db, args.resume, args.plot,
                         args.timeout, args.seed)


def cmd_cache(args) -> int:
    """``cuvil cache info|clear``: where the compile cache is and what it holds.

    Example::

        >>> import os, tempfile
        >>> os.environ["CUVIL_CACHE_DIR"] = tempfile.mkdtemp()
        >>> cmd_cache(make_parser().parse_args(["cache", "clear"]))
        removed 0 entries
        0
        >>> del os.environ["CUVIL_CACHE_DIR"]
    """
    if args.action == "clear":
        print(f"removed {targets.cache.clear()} entries")
        return 0
    info = targets.cache.info()
    state = info["state"] + (f" ({info['why']})" if info["why"] else "")
    print(f"directory: {info['directory']}\nstate:     {state}\n"
          f"entries:   {info['entries']}\nsize:      {info['bytes'] / 1e6:.2f} MB of "
          f"{info['max_bytes'] / 1e6:.0f} MB (CUVIL_CACHE_MAX_BYTES)")
    return 0


def main(argv=None) -> int:
    """Entry point of the ``cuvil`` console script.

    Example::

        >>> main(["show", "/nonexistent.tir"])
        1
    """
    args = make_parser().parse_args(argv)
    try:
        status = args.fn(args)
        sys.stdout.flush()          # a closed pipe shows here, not at interpreter exit
        return status
    except BrokenPipeError:
        # the reader stopped reading (`cuvil show k.py | head`): stop quietly, as Unix
        # tools do; what is still buffered for stdout goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CuvilError as err:
        print(f"cuvil: error {err.code}: {err.message}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"cuvil: error: {err}", file=sys.stderr)
        return 1


