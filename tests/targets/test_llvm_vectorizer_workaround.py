"""LLVM 22.1's loop vectorizer miscompiles sign-extended 32-bit indices holding
``i % 2**k`` (issue 25, repro 19): Cuvil computes access indices in 64 bits.

The vectorizer's decisions depend on the CPU, so each test builds for a pinned AVX2
and AVX-512 ``mcpu`` and runs the *optimised* IR again compiled for baseline x86-64
(``-O0``: nothing re-optimised): the vector code LLVM chose for that CPU runs on any
host."""

import ctypes
import pathlib
import re

import llvmlite.binding as llvm
import numpy as np
import pytest

import cuvil_tir as T
import targets
from targets.llvm.engine import Library

DATA = pathlib.Path(__file__).parent / "data"
VECTOR_CPUS = ["haswell", "skylake-avx512"]


def _run_anywhere(ir: str, symbol: str, arrays, restype=ctypes.c_int32):
    """Compile optimised IR for baseline x86-64 without optimising again and call
    ``symbol`` on the arrays' data pointers."""
    ir = re.sub(r"^attributes #\d+ = .*$", "", ir, flags=re.M)
    ir = re.sub(r"\)( [a-z_]+)* #\d+ \{", ") {", ir)
    lib = Library(ir, cpu="x86-64", opt_level=0)
    fn = ctypes.CFUNCTYPE(restype, *[ctypes.c_void_p] * len(arrays))(lib.address(symbol))
    fn(*[a.ctypes.data for a in arrays])


def _repro19(n):
    X0 = T.placeholder((n, 4, 2), dtype="int32", name="X0")
    X1 = T.placeholder((n, 2), dtype="int32", name="X1")
    X5 = T.placeholder((2, 4), dtype="int32", name="X5")
    Y = T.compute((n, 2), lambda i, j: X0[i, i % 4, j] + X5[j, i % 4] + X1[i, 1 - j],
                  name="Y")
    return T.create_prim_func([X0, X1, X5, Y])


@pytest.mark.parametrize("mcpu", VECTOR_CPUS)
@pytest.mark.parametrize("n", [16, 32])
def test_floormod_index_beside_its_sign_extended_sum_is_right(mcpu, n):
    func = _repro19(n)
    rng = np.random.default_rng(0)
    x0 = rng.integers(-100, 100, (n, 4, 2)).astype("int32")
    x1 = rng.integers(-100, 100, (n, 2)).astype("int32")
    x5 = rng.integers(-100, 100, (2, 4)).astype("int32")
    want = np.zeros((n, 2), "int32")
    T.interpret(func, x0, x1, x5, want)
    mod = targets.build(func, targets.Target("llvm", mcpu=mcpu))
    got = np.full((n, 2), -1, "int32")
    _run_anywhere(mod.get_source("ll-opt"), "main", [x0, x1, x5, got])
    np.testing.assert_array_equal(got, want)


def test_access_indices_are_computed_in_64_bits():
    ll = targets.build(_repro19(16), targets.Target("llvm", mcpu="haswell")).get_source("ll")
    assert re.search(r"srem i64 ", ll) and not re.search(r"srem i32 ", ll)


def test_reduced_ir_still_shows_the_upstream_bug():
    """The reduced IR kept for the LLVM report: while LLVM miscompiles it, Cuvil
    must keep computing indices in 64 bits (``targets.llvm.codegen_expr.index64``)."""
    src = (DATA / "llvm22_lv_sext_mask_index.ll").read_text()
    lib = Library(src, cpu="haswell", opt_level=1)
    x0 = np.arange(1000, 1064, dtype="int32")
    x5 = np.arange(8, dtype="int32") * 10
    y = np.full(16, -1, "int32")
    _run_anywhere(lib.optimized(), "f", [x0, x5, y], restype=None)
    want = x0[4 * np.arange(16) + np.arange(16) % 4] + x5[np.arange(16) % 4]
    version = ".".join(map(str, llvm.llvm_version_info))
    assert (y != want).any(), (f"LLVM {version} computes the reduced IR right: the "
                               "upstream bug is fixed there; say so in index64's note")
