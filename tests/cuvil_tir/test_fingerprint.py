"""T.fingerprint: renaming-invariant, stable across processes, sensitive to structure."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings

import cuvil_tir as T
import schedules as S
from cuvil_tir.visitor import substitute
from tests import workloads
from tests.cuvil_tir.test_structural import VARS, _exprs, _two_loops, stage

# the digest of `i * 2 + 1` (int32): changes only when the serialisation format does,
# and then fingerprint's _FORMAT must change too (persistent keys must not collide)
GOLDEN_EXPR = "44349e9c4f47fb6ef0c3d7abdea66272a0341de904366e9ef2be8ea4a891eb95"


def test_golden_digest_is_stable():
    assert T.fingerprint(T.var("i") * 2 + 1) == GOLDEN_EXPR


def test_renamed_functions_share_a_fingerprint():
    f, g = stage(), stage(name_a="X")
    assert T.fingerprint(f) == T.fingerprint(g)
    assert len(T.fingerprint(f)) == 64 and int(T.fingerprint(f), 16) >= 0


@pytest.mark.parametrize("other", [
    dict(scale=3.0), dict(n=5), dict(dtype="float16"), dict(name_b="C")],
    ids=["constant", "shape", "dtype", "block-name"])
def test_structural_differences_change_it(other):
    assert T.fingerprint(stage()) != T.fingerprint(stage(**other))


def test_loop_kind_annotations_scope_and_buffer_identity_matter():
    A = T.decl_buffer((4,), "float32", "A")
    B = T.decl_buffer((4,), "float32", "B")
    L = T.decl_buffer((4,), "float32", "L", scope="local")
    i = T.var("i")

    def loop(kind="serial", ann=None, dst=A, src=A):
        return T.For(i, T.const(0), T.const(4), kind, T.BufferStore(dst, src[i], (i,)),
                     annotations=ann)

    prints = {T.fingerprint(x) for x in (
        loop(), loop("parallel"), loop(ann={"k": 1}), loop(ann={"k": 2}),
        loop(ann={"k": "1"}), loop(ann={"k": 1.0}), loop(ann={"k": True}),
        loop(src=B), loop(dst=L, src=L))}
    assert len(prints) == 9


def test_sibling_rebinding_and_shadowing_agree_with_structural_equal():
    x, y, z = T.var("x"), T.var("y"), T.var("z")
    assert T.fingerprint(_two_loops(x, x)) == T.fingerprint(_two_loops(y, z))
    A = T.decl_buffer((8,), "float32", "A")
    outer = T.PrimFunc([A], T.For(x, T.const(0), T.const(4), "serial", T.For(
        y, T.const(0), T.const(2), "serial", T.BufferStore(A, T.const(1.0), (x,)))))
    inner = T.PrimFunc([A], T.For(x, T.const(0), T.const(4), "serial", T.For(
        z, T.const(0), T.const(2), "serial", T.BufferStore(A, T.const(1.0), (z,)))))
    assert T.fingerprint(outer) != T.fingerprint(inner)


def test_floats_are_exact_and_nan_is_stable():
    one_ulp_more = math.nextafter(0.1, 1.0)
    assert T.fingerprint(T.const(0.1, "float64")) == T.fingerprint(T.const(0.1, "float64"))
    assert T.fingerprint(T.const(0.1, "float64")) != T.fingerprint(T.const(one_ulp_more,
                                                                           "float64"))
    nan = float("nan")
    assert T.fingerprint(T.const(nan, "float32")) == T.fingerprint(T.const(nan, "float32"))


def test_parse_roundtrip_lowering_and_schedules():
    w = workloads.matmul(8, 8, 8)
    assert T.fingerprint(T.parse(str(w.func))) == T.fingerprint(w.func)
    lowered = T.lower(w.func)
    assert T.fingerprint(T.parse(str(lowered))) == T.fingerprint(lowered)
    sch = S.Schedule(w.func)
    assert T.fingerprint(sch) == T.fingerprint(w.func)
    sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    assert T.fingerprint(sch) != T.fingerprint(w.func)


@settings(max_examples=30)
@given(_exprs(VARS))
def test_renaming_preserves_the_fingerprint(e):
    fresh = [T.var(f"z{k}") for k in range(3)]
    renamed = substitute(e, {VARS[k]: fresh[(k + 1) % 3] for k in range(3)})
    assert T.fingerprint(e) == T.fingerprint(renamed)


@settings(max_examples=30)
@given(_exprs(VARS), _exprs(VARS))
def test_equal_fingerprints_mean_structurally_equal(e1, e2):
    assert (T.fingerprint(e1) == T.fingerprint(e2)) == T.structural_equal(e1, e2)


_CHILD = """
import json, sys
import cuvil_tir as T
from tests import workloads
from tests.cuvil_tir.test_structural import stage
out = {name: T.fingerprint(b().func) for name, b in sorted(workloads.ALL.items())}
out["stage"] = T.fingerprint(stage())
out["lowered"] = T.fingerprint(T.lower(workloads.matmul(8, 8, 8).func))
print(json.dumps(out))
"""


def test_identical_in_another_process_with_another_hash_seed():
    env = dict(os.environ, PYTHONHASHSEED="12345")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         env=env, cwd=root, timeout=120)
    assert res.returncode == 0, res.stderr
    child = json.loads(res.stdout)
    for name, b in workloads.ALL.items():
        assert child[name] == T.fingerprint(b().func), name
    assert child["stage"] == T.fingerprint(stage())
    assert child["lowered"] == T.fingerprint(T.lower(workloads.matmul(8, 8, 8).func))


def test_refuses_what_is_not_ir():
    with pytest.raises(T.CuvilError, match="expected a PrimFunc, an IRModule.*found int"):
        T.fingerprint(3)
    A = T.decl_buffer((4,), "float32", "A")
    i = T.var("i")
    odd = T.For(i, T.const(0), T.const(4), "serial", T.BufferStore(A, T.const(0.0), (i,)),
                annotations={"k": object()})
    with pytest.raises(T.CuvilError, match="found a object .*annotations must hold plain"):
        T.fingerprint(odd)
