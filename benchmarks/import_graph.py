"""The import graph of Cuvil's packages: who imports whom, the cycles, the deferred
imports.

Run:  python benchmarks/import_graph.py [--deferred] [--json out.json]

Every ``import`` of every module under ``cuvil_tir/``, ``schedules/`` and ``targets/``
is read from the source (nothing is imported) and mapped to a *layer*: ``cuvil_tir``,
``schedules``, the ``targets`` package's own modules (``targets``: the public names),
what every backend's ``load`` shares (``targets.runtime``), the C family's shared
printer (``targets.cstyle``), each backend (``targets.llvm``, ``targets.c``,
``targets.cuda``, ``targets.accel``) and the top layer of recipes and the CLI
(``targets.toolkit``).
An import inside a function body (*deferred*) counts as an edge too: it is a
dependency that merely runs later.  The report lists the edges between layers, every
elementary cycle among them, and the deferred imports.  A deferred import is wanted
only where an optional third-party module is involved (a module that must import
without ``cupy`` defers ``import cupy``); every other one is listed in
:data:`DEFERRED` with the reason it must stay, and ``tests/test_import_graph.py``
refuses any import deferred without one (an import cycle inside a package is broken
by moving the shared piece down or splitting a module, not by deferring).  Backends
found through Python entry points are loaded with ``importlib`` by the registry
(:mod:`cuvil_tir.target.registry`), not by an import statement.

The rules that ``tests/test_import_graph.py`` checks read the same data
(:func:`collect`, :func:`layer_edges`, :func:`cycles`).

Example::

    >>> imps = collect()
    >>> any(i.layer == "cuvil_tir" for i in imps)
    True
    >>> layer_of("targets.llvm.codegen"), layer_of("schedules.tune.search")
    ('targets.llvm', 'schedules')
"""


import argparse
import ast
import json
import pathlib
import sys
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("cuvil_tir", "schedules", "targets")
BACKENDS = ("llvm", "c", "cuda", "accel")
#: what the backends share, below them: the runtime every ``load`` uses, and the C
#: family's printer (``c``, CUDA C and accelerator C subclass it)
SHARED = ("runtime", "cstyle")
#: the top layer: code that uses schedules and backends together
TOP = ("toolkit",)
#: third-party modules a Cuvil module may load only when a feature needs them
OPTIONAL = ("cupy", "llvmlite", "distributed", "dask", "matplotlib", "graphviz",
            "threadpoolctl", "psutil", "nvidia")


#: the deferred imports that stay, ``{(importing module, imported module): reason}``;
#: a reason starting with "pending:" names work in flight that removes the entry (the
#: stale-entry check of the test spares it)
DEFERRED = {
    ("schedules.trace", "schedules.schedule"):
        "Trace.apply returns a new Schedule, and a Schedule records every step in a "
        "Trace: each class builds the other",
}


@dataclass(frozen=True)
class Import:
    """One import statement: the importing module, the imported module, whether it
    sits inside a function body, and the importer's layer."""

    module: str
    target: str
    deferred: bool
    layer: str
    line: int


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name (``None`` outside Cuvil's packages).

    Example::

        >>> layer_of("targets.cache.store"), layer_of("numpy")
        ('targets', None)
        >>> layer_of("targets.accel.examples.gemm"), layer_of("targets.accel.codegen")
        ('targets.toolkit', 'targets.accel')
    """
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    if parts[:3] == ["targets", "accel", "examples"]:
        # example devices and the schedules shipped beside them are user files: they
        # use schedules and a backend together, as the top layer does
        return f"targets.{TOP[0]}"
    if parts[0] == "targets" and len(parts) > 1 and parts[1] in BACKENDS + SHARED + TOP:
        return f"targets.{parts[1]}"
    return parts[0]


def _module_name(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_pkg: bool) -> list:
    if node.level == 0:
        base = node.module or ""
    else:
        pkg = module.split(".") if is_pkg else module.split(".")[:-1]
        pkg = pkg[:len(pkg) - node.level + 1]
        base = ".".join(pkg + ([node.module] if node.module else []))
    if node.module is None:       # from . import a, b: each name may be a module
        return [f"{base}.{a.name}" for a in node.names]
    return [base]


class _Walker(ast.NodeVisitor):
    def __init__(self, module: str, is_pkg: bool):
        self.module, self.is_pkg = module, is_pkg
        self.depth = 0
        self.found: list = []

    def _func(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _func

    def visit_If(self, node):
        test = node.test
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            return          # annotations only: no run-time dependency
        self.generic_visit(node)

    def visit_Import(self, node):
        for a in node.names:
            self.found.append((a.name, self.depth > 0, node.lineno))

    def visit_ImportFrom(self, node):
        for name in _resolve(node, self.module, self.is_pkg):
            self.found.append((name, self.depth > 0, node.lineno))


def collect(root: pathlib.Path = ROOT) -> list:
    """Every import statement of Cuvil's packages, as :class:`Import` records."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            module = _module_name(path, root)
            walker = _Walker(module, path.name == "__init__.py")
            walker.visit(ast.parse(path.read_text(), str(path)))
            for target, deferred, line in walker.found:
                out.append(Import(module, target, deferred, layer_of(module), line))
    return out


def layer_edges(imports: list) -> dict:
    """``{(from_layer, to_layer): [Import, ...]}`` for imports between two layers."""
    edges: dict = {}
    for imp in imports:
        to = layer_of(imp.target)
        if to is not None and to != imp.layer:
            edges.setdefault((imp.layer, to), []).append(imp)
    return edges


def cycles(edges) -> list:
    """Every elementary cycle of the layer graph, each as a list of layers starting at
    its smallest name.

    Example::

        >>> cycles({("a", "b"): [], ("b", "a"): [], ("b", "c"): []})
        [['a', 'b']]
    """
    succ: dict = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
    found = set()

    def walk(start, node, path, on_path):
        for nxt in sorted(succ.get(node, ())):
            if nxt == start:
                found.add(tuple(path))
            elif nxt not in on_path and nxt > start:
                walk(start, nxt, path + [nxt], on_path | {nxt})

    for start in sorted(succ):
        walk(start, start, [start], {start})
    return sorted(list(c) for c in found)


def unexplained(imports: list) -> list:
    """The deferred imports neither of an optional dependency nor in :data:`DEFERRED`.

    Example::

        >>> unexplained([Import("cuvil_tir.a", "cuvil_tir.b", True, "cuvil_tir", 3),
        ...              Import("targets.cuda.args", "cupy", True, "targets.cuda", 9)])
        ['cuvil_tir.a:3 -> cuvil_tir.b']
    """
    return [f"{i.module}:{i.line} -> {i.target}" for i in imports if i.deferred
            and i.target.split(".")[0] not in OPTIONAL
            and _kept(i) is None]


def _kept(imp: Import):
    """The :data:`DEFERRED` key that explains ``imp`` (an import of the listed module
    or of one of its submodules), or None."""
    for key in DEFERRED:
        if key[0] == imp.module and (imp.target == key[1] or
                                     imp.target.startswith(key[1] + ".")):
            return key
    return None


def report(imports: list) -> dict:
    """The figures the script prints (and writes with ``--json``)."""
    edges = layer_edges(imports)
    deferred = [i for i in imports if i.deferred]
    optional = [i for i in deferred if i.target.split(".")[0] in OPTIONAL]
    kept = sorted({_kept(i) for i in deferred if _kept(i) is not None})
    return {
        "imports": len(imports),
        "deferred": len(deferred),
        "deferred_optional": len(optional),
        "deferred_cuvil": sum(layer_of(i.target) is not None for i in deferred),
        "edges": {f"{a} -> {b}": len(v) for (a, b), v in sorted(edges.items())},
        "cycles": [" -> ".join(c + [c[0]]) for c in cycles(edges)],
        "deferred_kept": {f"{a} -> {b}": DEFERRED[(a, b)] for a, b in kept},
        "deferred_unexplained": unexplained(imports),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deferred", action="store_true",
                    help="also list every deferred import of a Cuvil module")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    imports = collect()
    rep = report(imports)
    print(f"{rep['imports']} import statements; {rep['deferred']} deferred into function "
          f"bodies ({rep['deferred_cuvil']} of Cuvil modules, {rep['deferred_optional']} "
          "of optional dependencies)")
    print("edges between layers (imports):")
    for edge, n in rep["edges"].items():
        print(f"  {edge:42s} {n}")
    print(f"{len(rep['cycles'])} cycles between layers:")
    for c in rep["cycles"]:
        print("  " + c)
    print(f"{len(rep['deferred_kept'])} deferred imports kept, each for a reason:")
    for edge, why in rep["deferred_kept"].items():
        print(f"  {edge}: {why}")
    print(f"{len(rep['deferred_unexplained'])} deferred without a reason:")
    for u in rep["deferred_unexplained"]:
        print("  " + u)
    if args.deferred:
        for i in imports:
            if i.deferred and layer_of(i.target) is not None:
                print(f"  {i.module}:{i.line} -> {i.target}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
