"""The numbers of the backend contract (issue 21): the import graph, the files a new
backend touches, the lines per backend, the build times of tutorial 04's GEMM (cold and
cached), the instruction count of its inner loop, and the accelerator GEMM's cycles.

Run:  python benchmarks/contract_numbers.py [--quick] [--json out.json]
      [--against ROOT --against-python PY]

For instance, against the commit before the contract (its own worktree and venv)::

    git worktree add /tmp/before bd01c81 && python3 -m venv /tmp/before/.venv
    /tmp/before/.venv/bin/pip install -q -e /tmp/before
    python benchmarks/contract_numbers.py --against /tmp/before \
        --against-python /tmp/before/.venv/bin/python

Everything is read or run from a source tree (``--root``, default this checkout); the
dynamic figures run in child processes with that tree as working directory, so the
same script measures an older checkout (``--against`` a worktree of it, with its own
interpreter ``--python``): the build times are then taken interleaved, one tree after
the other, and reported as medians.  ``--quick`` (what CI runs, ``.ci/run``) takes
one repeat, one CPU and a small accelerator GEMM.

* *import graph*: import statements, the deferred ones (those of Cuvil modules apart),
  the layers and the cycles between them (``benchmarks/import_graph.py``).
* *backend names outside their folder*: the files outside ``targets/<name>/`` that
  spell a backend's kind as a string (``"cuda"``): where adding a backend means editing
  someone else's file.  The contract's own test backend (``tests/targets/
  test_new_backend.py``) is counted the same way.
* *lines*: the non-blank lines of each backend folder and of the core's contract.
* *build*: ``targets.build`` of tutorial 04's 1024^3 GEMM in a fresh process, with an
  empty ``CUVIL_CACHE_DIR`` (cold) and again with the entry it wrote (cached).
* *inner loop*: the innermost loop of the emitted assembly with the most FMAs, for a
  pinned ``mcpu`` (an AVX-512 and an AVX2 CPU), as instructions and FMAs.
* *accelerator*: simulated cycles of the toy NPU's int8 GEMM (``benchmarks/accel.py``).

Example::

    >>> loop = hot_loop(".L1:\\n vfmadd231ps %zmm0, %zmm1, %zmm2\\n dec %eax\\n jne .L1\\n")
    >>> loop["instructions"], loop["fma"]
    (3, 1)
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
BACKENDS = ("llvm", "c", "cstyle", "cuda", "accel", "runtime")
#: the core's side of the contract (whatever of it a tree has)
CONTRACT = ("cuvil_tir/target", "targets/registry.py", "targets/build.py",
            "targets/program.py", "targets/cache")
MCPUS = ("znver4", "haswell")
GEMM = (1024, 1024, 1024)

_BUILD = """
import os, sys, time
sys.path.insert(0, os.getcwd())
from tests.workloads import load_script
import targets
tut = load_script("tutorials/04_fast_matmul_cpu.py")
sch = tut.gemm_schedule({m}, {n}, {k})
t0 = time.perf_counter()
targets.build(sch, tut.TARGET, name="gemm_contract")
print("BUILD", time.perf_counter() - t0)
"""

_ASM = """
import os, sys
sys.path.insert(0, os.getcwd())
from tests.workloads import load_script
import targets
from targets.llvm import cpu_info
tut = load_script("tutorials/04_fast_matmul_cpu.py")
target = targets.Target("llvm", mcpu={mcpu!r})
info = cpu_info(target)
nr = 2 * info.lanes("float32")
mr = max(1, min(12, (info.vector_registers - 4) // 2))
sch = tut.gemm_schedule({m}, {n}, {k}, mr=mr, nr=nr, jb=tut.panel_block({n}, {k}, nr, info))
sys.stdout.write(targets.build(sch, target, name="gemm_asm").get_source("asm"))
"""

_ACCEL = """
import os, sys
sys.path.insert(0, os.getcwd())
from tests.workloads import load_script
import targets
bench = load_script("benchmarks/accel.py")
from targets.accel.examples.toy_npu import toy_npu
targets.register_target(toy_npu, replace=True)
import inspect
# the toy NPU's rows: gemm_rows took (n, m, k, repeat) before the example NPUs were named
lead = ("toy-npu",) if "npu" in inspect.signature(bench.gemm_rows).parameters else ()
for r in bench.gemm_rows(*lead, {n}, {n}, {n}, 1):
    print("ACCEL", r["buffering"], r["cycles"])
"""


def _load(root: pathlib.Path, rel: str):
    spec = importlib.util.spec_from_file_location(f"_cn_{abs(hash(str(root)))}",
                                                  root / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def import_graph(root: pathlib.Path) -> dict:
    """The import graph's figures for the tree at ``root`` (read, not imported)."""
    g = _load(ROOT, "benchmarks/import_graph.py")
    imps = g.collect(root)
    rep = g.report(imps)
    layers = {i.layer for i in imps}
    return {"imports": rep["imports"], "deferred": rep["deferred"],
            "deferred_cuvil": rep["deferred_cuvil"], "layers": len(layers),
            "layer_edges": len(rep["edges"]), "cycles": len(rep["cycles"])}


def _py_files(root: pathlib.Path):
    for pkg in ("cuvil_tir", "schedules", "targets"):
        yield from (root / pkg).rglob("*.py")


def _strings(path: pathlib.Path) -> set:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                              ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs}


def backend_mentions(root: pathlib.Path) -> dict:
    """Per backend, the files outside its own folder whose code (docstrings aside)
    holds its kind's name as a string: what adding such a backend edits elsewhere."""
    kinds = {"llvm": "llvm", "c": "c", "cuda": "cuda", "accel": "toy-npu"}
    strings = {p: _strings(p) for p in _py_files(root)}
    out = {folder: sorted(str(p.relative_to(root)) for p, s in strings.items()
                          if kind in s and root / "targets" / folder not in p.parents)
           for folder, kind in kinds.items()}
    test = root / "tests/targets/test_new_backend.py"
    if test.exists():
        kind = re.search(r"""^NAME = ["']([\w-]+)["']""", test.read_text(), re.M).group(1)
        strings[test] = _strings(test)
        out["test backend"] = sorted(str(p.relative_to(root))
                                     for p, s in strings.items() if kind in s)
    return out


def lines(root: pathlib.Path) -> dict:
    """Non-blank lines of each backend folder and of the core's contract files."""
    def count(path):
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        return sum(sum(1 for ln in f.read_text().splitlines() if ln.strip())
                   for f in files)
    out = {b: count(root / "targets" / b) for b in BACKENDS if (root / "targets" / b).exists()}
    out["contract"] = sum(count(root / c) for c in CONTRACT if (root / c).exists())
    return out


def _child(root: pathlib.Path, python: str, code: str, env=None) -> str:
    res = subprocess.run([python, "-c", code], cwd=root, capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, timeout=1200)
    if res.returncode != 0:
        raise RuntimeError(f"child in {root} failed:\n{res.stderr[-2000:]}")
    return res.stdout


def build_once(root: pathlib.Path, python: str) -> tuple:
    """(cold, cached) seconds of one tutorial-04 GEMM build, each in a fresh process."""
    code = _BUILD.format(m=GEMM[0], n=GEMM[1], k=GEMM[2])
    with tempfile.TemporaryDirectory() as cache:
        env = {"CUVIL_CACHE_DIR": cache}
        cold = float(_child(root, python, code, env).split("BUILD")[1])
        cached = float(_child(root, python, code, env).split("BUILD")[1])
    return cold, cached


def hot_loop(asm: str) -> dict:
    """The innermost loop (a backward branch to a label, enclosing no other loop) with
    the most FMA instructions: its instruction and FMA counts."""
    body = [ln.strip() for ln in asm.splitlines()]
    labels, loops = {}, []
    for n, ln in enumerate(body):
        m = re.match(r"^([.\w$]+):", ln)
        if m:
            labels[m.group(1)] = n
            continue
        m = re.match(r"^j\w+\s+([.\w$]+)$", ln)
        if m and m.group(1) in labels and labels[m.group(1)] < n:
            loops.append((labels[m.group(1)], n))
    inner = [(a, b) for a, b in loops
             if not any(a <= c < d <= b and (c, d) != (a, b) for c, d in loops)]

    def insns(a, b):
        return [ln for ln in body[a + 1:b + 1]
                if ln and not ln.endswith(":") and not ln.startswith((".", "#"))]
    best = max(inner, key=lambda ab: sum("fmadd" in i for i in insns(*ab)), default=None)
    if best is None:
        return {"instructions": 0, "fma": 0}
    ins = insns(*best)
    return {"instructions": len(ins), "fma": sum("fmadd" in i for i in ins)}


def inner_loops(root: pathlib.Path, python: str, mcpus) -> dict:
    return {mcpu: hot_loop(_child(root, python, _ASM.format(
        mcpu=mcpu, m=GEMM[0], n=GEMM[1], k=GEMM[2]))) for mcpu in mcpus}


def accel_cycles(root: pathlib.Path, python: str, n: int) -> dict:
    out = _child(root, python, _ACCEL.format(n=n))
    return {f"gemm {n} {b}": int(c) for _, b, c in
            (ln.split() for ln in out.splitlines() if ln.startswith("ACCEL"))}


def measure(trees: dict, quick: bool) -> dict:
    """Every figure for each ``{label: (root, python)}``; build times interleaved."""
    repeat = 1 if quick else 5
    res = {label: {"import graph": import_graph(root), "lines": lines(root),
                   "backend names outside their folder": {
                       k: len(v) for k, v in backend_mentions(root).items()}}
           for label, (root, _) in trees.items()}
    times = {label: [] for label in trees}
    for _ in range(repeat):
        for label, (root, py) in trees.items():
            times[label].append(build_once(root, py))
    for label, (root, py) in trees.items():
        res[label]["build s (cold, cached)"] = tuple(
            round(statistics.median(t[i] for t in times[label]), 3) for i in (0, 1))
        res[label]["inner loop"] = inner_loops(root, py, MCPUS[:1] if quick else MCPUS)
        res[label]["accel cycles"] = accel_cycles(root, py, 128 if quick else 256)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(ROOT), help="the tree measured (default: this)")
    ap.add_argument("--python", default=sys.executable, help="its interpreter")
    ap.add_argument("--against", help="a second tree (e.g. a worktree of an older commit)")
    ap.add_argument("--against-python", help="the second tree's interpreter")
    ap.add_argument("--quick", action="store_true", help="one repeat, one CPU (CI)")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    trees = {"this": (pathlib.Path(args.root), args.python)}
    if args.against:
        trees = {"against": (pathlib.Path(args.against),
                             args.against_python or args.python), **trees}
    res = measure(trees, args.quick)
    for label, figs in res.items():
        print(f"== {label} ({trees[label][0]})")
        for key, val in figs.items():
            print(f"  {key}: {val}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
