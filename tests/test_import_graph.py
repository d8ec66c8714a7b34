"""The layering of the packages (issue 21 item 5): no cycle between them, the language
loads no backend, schedules reach backends only through the contract in the core, no
backend imports another.  The graph is read from the sources by
``benchmarks/import_graph.py`` (deferred imports count: they are dependencies too)."""

import subprocess
import sys

import pytest

from tests.workloads import load_script

G = load_script("benchmarks/import_graph.py")
IMPORTS = G.collect()
EDGES = G.layer_edges(IMPORTS)
BACKENDS = {f"targets.{b}" for b in G.BACKENDS}


def _where(edge) -> str:
    return ", ".join(f"{i.module}:{i.line} imports {i.target}" for i in EDGES[edge])


def test_no_cycle_between_packages():
    assert G.cycles(EDGES) == []


def test_the_language_imports_neither_schedules_nor_targets():
    bad = [e for e in EDGES if e[0] == "cuvil_tir"]
    assert bad == [], "; ".join(_where(e) for e in bad)


def test_schedules_import_no_targets_module():
    bad = [e for e in EDGES if e[0] == "schedules" and e[1].startswith("targets")]
    assert bad == [], "; ".join(_where(e) for e in bad)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_no_backend_imports_another(backend):
    bad = [e for e in EDGES if e[0] == backend and e[1] in BACKENDS | {"targets"}]
    assert bad == [], "; ".join(_where(e) for e in bad)


#: backend modules that still take analyses from schedule primitives; the analyses move
#: into cuvil_tir (issue 21 item 4), and this list only shrinks
PENDING = {"targets.accel.transfer", "targets.cuda.reduction"}


def test_only_the_top_layer_uses_schedules_and_backends_together():
    users = {i.module for (a, b), imps in EDGES.items() if b == "schedules" for i in imps
             if a != "targets.toolkit"}
    assert users <= PENDING, users


def test_imports_are_deferred_only_for_optional_dependencies_or_a_stated_reason():
    # an import cycle inside a package is broken by moving code, not by deferring
    assert G.unexplained(IMPORTS) == []
    assert all(len(why) > 20 for why in G.DEFERRED.values())


def test_every_kept_deferred_import_still_exists():
    used = {G._kept(i) for i in IMPORTS if i.deferred}
    stale = [k for k, why in G.DEFERRED.items()
             if k not in used and not why.startswith("pending:")]
    assert stale == []


def test_a_deferred_import_without_a_reason_is_found():
    fake = G.Import("schedules.schedule", "schedules.debug", True, "schedules", 1)
    assert G.unexplained(IMPORTS + [fake]) == ["schedules.schedule:1 -> schedules.debug"]
    optional = G.Import("schedules.tune.report", "matplotlib", True, "schedules", 2)
    assert G.unexplained([optional]) == []


def test_the_reference_finds_edges_and_cycles():
    # the checks above cannot pass vacuously: the reader sees imports and cycles
    assert ("targets.llvm", "cuvil_tir") in EDGES and ("schedules", "cuvil_tir") in EDGES
    assert G.cycles({("a", "b"): [], ("b", "c"): [], ("c", "a"): []}) == [["a", "b", "c"]]


_FRESH = """
import sys
import cuvil_tir as T
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("targets", "schedules",
                                                             "llvmlite"))
print("loaded:", loaded)
A = T.placeholder((4,), name="A")
f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
print("lowered:", T.lower(f, "llvm").entry.attr("calling_conv"))
"""


def test_the_language_alone_loads_no_backend_and_finds_llvm_through_the_registry():
    res = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "loaded: []" in res.stdout and "lowered: host" in res.stdout
