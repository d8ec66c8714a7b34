"""Which functions of TVM's GPU tests are cases: found statically in each file's text.

A case is one ``@T.prim_func`` definition that binds a GPU thread axis (a
``T.thread_binding``, ``T.launch_thread`` or ``T.env_thread`` to ``blockIdx``,
``threadIdx`` or ``vthread``).  Its role says what TVM's test does with it:

- ``input``: a scheduled function (a MetaSchedule sketch, or what a TVM pass is given);
- ``error``: a function TVM's test expects TVM to refuse (it is handed to a helper whose
  body is a ``pytest.raises``);
- ``output``: what a TVM lowering pass is expected to produce from an input
  (``transformed_*``, ``lowered_*``, ``expected``, ``ref``, ``after``): TVM's own
  lowering, not a schedule; reported apart and not counted in the pass rate.

Example::

    >>> text = '''
    ... from tvm.script import tir as T
    ... import pytest
    ... def _check_fail(f):
    ...     with pytest.raises(ValueError):
    ...         f()
    ... @T.prim_func
    ... def bad(A: T.Buffer((4,), "float32")):
    ...     for i in T.thread_binding(4, thread="threadIdx.x"):
    ...         A[i] = 1.0
    ... @T.prim_func
    ... def lowered_bad(A: T.Buffer((4,), "float32")):
    ...     for i in T.thread_binding(4, thread="threadIdx.x"):
    ...         A[i] = 1.0
    ... def test_bad():
    ...     _check_fail(bad)
    ... '''
    >>> [(d.name, d.role) for d in definitions(text)]
    [('bad', 'error'), ('lowered_bad', 'output')]
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

#: the test files of the measurement, inside a TVM source tree
SUITE_FILES = (
    "tests/python/tir-transform/test_tir_transform_inject_software_pipeline.py",
    "tests/python/tir-transform/test_tir_transform_lower_cross_thread_reduction.py",
    "tests/python/tir-transform/test_tir_transform_thread_sync.py",
    "tests/python/meta_schedule/test_meta_schedule_space_cuda.py",
    "tests/python/meta_schedule/test_meta_schedule_space_cuda_async.py",
    "tests/python/meta_schedule/test_meta_schedule_schedule_rule_mlt.py",
    "tests/python/meta_schedule/test_meta_schedule_schedule_rule_mlt_tc.py",
    "tests/python/meta_schedule/test_meta_schedule_schedule_rule_mlt_intrin.py",
    "tests/python/meta_schedule/test_meta_schedule_schedule_rule_cross_thread_reduction.py",
)

_GPU = re.compile(r"""(thread_binding|launch_thread|env_thread)\b[^\n]*?
                      ["'](blockIdx|threadIdx|vthread)""", re.X)
_OUTPUT_PREFIXES = ("transformed_", "lowered_")
_OUTPUT_NAMES = ("expected", "ref", "after")


@dataclass(frozen=True)
class Definition:
    """One ``@T.prim_func`` definition: its ``name``, the ``line`` of its first
    decorator, the enclosing functions (``scope``, outer first) and its ``role``."""

    name: str
    line: int
    scope: tuple
    role: str

    @property
    def key(self) -> str:
        """``scope/name`` (the scope names a definition that a test function holds)."""
        return "/".join(self.scope + (self.name,))


def definitions(source: str) -> list:
    """The GPU ``@T.prim_func`` definitions of a test file, in source order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    refused = _refused_names(tree)
    found = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _is_prim_func(child):
                    text = ast.get_source_segment(source, child) or ""
                    if _GPU.search(text):
                        found.append(Definition(child.name, child.decorator_list[0].lineno,
                                                scope, _role(child.name, refused)))
                    continue
                visit(child, scope + (child.name,))
            elif isinstance(child, ast.ClassDef):
                visit(child, scope + (child.name,))
            else:
                visit(child, scope)

    visit(tree, ())
    return found


def _is_prim_func(node) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr == "prim_func":
            return True
    return False


def _role(name: str, refused: set) -> str:
    if name in refused:
        return "error"
    if name.startswith(_OUTPUT_PREFIXES) or name in _OUTPUT_NAMES:
        return "output"
    return "input"


def _refused_names(tree) -> set:
    # helpers whose body expects an error; the names handed to them
    helpers = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)
               and "pytest.raises" in ast.unparse(f)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in helpers:
            names.update(a.id for a in node.args if isinstance(a, ast.Name))
    return names


__all__ = ["Definition", "definitions", "SUITE_FILES"]
