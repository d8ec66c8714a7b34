"""The llvm runtime: every build runs the object code of its Program (get_source("obj"),
loading it back, `cuvil build --emit obj`)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import schedules as S
import targets
from targets.llvm.runtime import LLVMRuntimeModule
from tests import workloads as W
from tests.targets.test_cli import KERNEL_PY


def _roundtrip(mod, w):
    obj = mod.get_source("obj")
    assert isinstance(obj, bytes) and obj[:4] == b"\x7fELF"
    program = mod.program.replace(binaries={"obj": obj}, sources={"ll": mod.get_source()})
    loaded = targets.Module(LLVMRuntimeModule(program), program, mod.target)
    arrays = w.make_inputs(np.random.default_rng(1))
    loaded(*arrays)
    w.check(arrays)


def test_object_code_loads_back_and_runs():
    w = W.matmul(16, 16, 16)
    mod = targets.build(w.func, "llvm")
    assert "obj" in mod.source_formats
    _roundtrip(mod, w)


def test_object_code_of_a_parallel_kernel():
    w = W.matmul(32, 16, 16)
    sch = S.Schedule(w.func)
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    mod = targets.build(sch, "llvm")
    assert b"cuvil_parallel_launch" in mod.get_source("obj")
    _roundtrip(mod, w)


def test_cli_emit_obj_writes_an_object_file(tmp_path):
    src = tmp_path / "kernel.py"
    src.write_text(KERNEL_PY)
    out = tmp_path / "kernel.o"
    r = subprocess.run([sys.executable, "-m", "targets.toolkit", "build", str(src), "--emit", "obj",
                        "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:4] == b"\x7fELF"
    r = subprocess.run([sys.executable, "-m", "targets.toolkit", "build", str(src), "--emit", "obj"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "--emit obj writes binary data; give an output file with -o" in r.stderr


def test_every_build_runs_its_programs_object_code_even_without_the_cache(monkeypatch):
    import gc

    monkeypatch.setenv("CUVIL_CACHE", "0")
    w1, w2 = W.matmul(8, 8, 8), W.elementwise_chain(16)
    m1 = targets.build(w1.func, "llvm -mcpu=haswell")
    m2 = targets.build(w2.func, "llvm -mcpu=haswell")
    assert m1.entry_name == m2.entry_name == "main"   # same symbol, two engines
    for m, w in ((m1, w1), (m2, w2)):
        assert m.runtime.library.object_code() is m.program.binaries["obj"]
        arrays = w.make_inputs(np.random.default_rng(2))
        m(*arrays)
        w.check(arrays)
    del m1
    gc.collect()                       # a collected build takes only its own engine
    arrays = w2.make_inputs(np.random.default_rng(3))
    m2(*arrays)
    w2.check(arrays)
