"""The compile cache in targets.build: hits across processes, misses on any change,
corrupt entries rebuilt, many processes at once."""

import os
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.cache import cache_key

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUVIL_CACHE", raising=False)
    return tmp_path / "cache"


def _func(scale=2.0, n=64):
    A = T.placeholder((n,), name="A")
    return T.create_prim_func([A, T.compute((n,), lambda i: A[i] * scale, name="B")])


def _check(mod, scale=2.0, n=64):
    a, b = np.arange(n, dtype="float32"), np.zeros(n, "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a * scale)


def test_second_build_is_a_hit_and_runs_the_same(cache_dir):
    first = targets.build(_func())
    assert not first.from_cache
    second = targets.build(_func())
    assert second.from_cache
    _check(second)
    assert second.get_source() == first.get_source()
    assert T.structural_equal(second.lowered, first.lowered)
    assert second.get_source("asm") == first.get_source("asm")
    assert targets.cache.info()["entries"] == 1


def test_a_build_that_is_stored_generates_its_code_once(cache_dir, monkeypatch):
    # code generation: emit_object, or a module added to an MCJIT engine
    import llvmlite.binding as llvm
    from targets.llvm import threadpool
    threadpool.ensure_loaded()                # the pool's own code, once per process
    calls = []
    emit, add = llvm.TargetMachine.emit_object, llvm.ExecutionEngine.add_module
    monkeypatch.setattr(llvm.TargetMachine, "emit_object",
                        lambda self, mod: calls.append("emit") or emit(self, mod))
    monkeypatch.setattr(llvm.ExecutionEngine, "add_module",
                        lambda self, mod: calls.append("jit") or add(self, mod))
    mod = targets.build(_func(scale=3.0))
    assert not mod.from_cache
    _check(mod, scale=3.0)
    assert calls == ["emit"]                # the object stored is the object that runs
    assert mod.get_source("obj") == mod.runtime.library.object_code()
    assert "fmul" in mod.get_source("ll-opt") and calls == ["emit"]
    assert targets.build(_func(scale=3.0)).from_cache


def test_hit_in_a_new_process(cache_dir):
    script = textwrap.dedent("""
        import numpy as np, cuvil_tir as T, targets
        A = T.placeholder((64,), name="A")
        f = T.create_prim_func([A, T.compute((64,), lambda i: A[i] * 2.0, name="B")])
        mod = targets.build(f)
        a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
        mod(a, b)
        assert (b == a * 2).all()
        print("hit" if mod.from_cache else "miss")
    """)
    env = {**os.environ, "PYTHONPATH": ROOT}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    assert [r.stdout.strip() for r in runs] == ["miss", "hit"], [r.stderr for r in runs]


def test_any_change_misses(cache_dir, monkeypatch):
    base = targets.build(_func())
    assert not targets.build(_func(scale=3.0)).from_cache          # another function
    sch = S.Schedule(_func())
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 8])
    assert not targets.build(sch).from_cache                       # another schedule
    assert not targets.build(_func(), targets.Target("llvm", opt_level=2)).from_cache
    assert not targets.build(_func(), name="other").from_cache     # another symbol
    f = _func().with_attr("global_symbol", "main")
    key = cache_key(f, base.target)
    monkeypatch.setattr(T, "__version__", "99.0.0")                # another Cuvil
    assert cache_key(f, base.target) != key
    assert not targets.build(_func()).from_cache
    monkeypatch.undo()
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(cache_dir))
    assert targets.build(_func()).from_cache


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupt_or_truncated_entry_is_rebuilt(cache_dir, damage):
    targets.build(_func())
    (path,) = [os.path.join(d, n) for d, _, names in os.walk(cache_dir) for n in names]
    data = open(path, "rb").read()
    if damage == "flip":
        mid = len(data) // 2
        data = data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:]
    else:
        data = data[:len(data) - 100]
    open(path, "wb").write(data)
    again = targets.build(_func())
    assert not again.from_cache
    _check(again)
    assert targets.build(_func()).from_cache


def test_two_swapped_entries_are_rebuilt_not_run(cache_dir):
    """Issue 25 F4: each of two kernels found the other's (intact) entry under its key
    and ran its machine code (a segfault, or 16 of 2**20 outputs written)."""
    small, big = _func(n=16), _func(n=1 << 12)
    targets.build(small)
    (first,) = [os.path.join(d, n) for d, _, names in os.walk(cache_dir) for n in names]
    targets.build(big)
    (second,) = [os.path.join(d, n) for d, _, names in os.walk(cache_dir) for n in names
                 if os.path.join(d, n) != first]
    a, b = open(first, "rb").read(), open(second, "rb").read()
    open(first, "wb").write(b)
    open(second, "wb").write(a)
    for f, n in ((small, 16), (big, 1 << 12)):
        mod = targets.build(f)
        assert not mod.from_cache
        _check(mod, n=n)
        assert targets.build(f).from_cache


def test_cache_off(cache_dir, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE", "0")
    targets.build(_func())
    assert not targets.build(_func()).from_cache
    assert not os.path.exists(cache_dir)


def test_info_and_clear(cache_dir):
    targets.build(_func())
    targets.build(_func(scale=5.0))
    info = targets.cache.info()
    assert info["entries"] == 2 and info["bytes"] > 0 and info["enabled"]
    assert info["directory"] == str(cache_dir)
    assert targets.cache.clear() == 2
    assert targets.cache.info()["entries"] == 0


@pytest.mark.parametrize("setting, why", [
    ("file", r"the cache folder .* is a file, not a folder; set CUVIL_CACHE_DIR to a "
             r"folder"),
    ("under-file", r"the cache folder .*/sub is under .*, which is a file, not a folder"),
    ("max=-5", r"CUVIL_CACHE_MAX_BYTES='-5' is not a positive whole number of bytes; "
               r"set it to one \(e.g. 1073741824 for 1 GiB\) or unset it"),
    ("max=lots", r"CUVIL_CACHE_MAX_BYTES='lots' is not a positive whole number"),
])
def test_a_cache_that_cannot_work_says_off_and_why_and_warns_once(
        tmp_path, monkeypatch, capsys, setting, why):
    """Issue 25: these turned caching off silently while ``cuvil cache info`` said
    "state: on" (and a bad CUVIL_CACHE_MAX_BYTES evicted every entry)."""
    from targets.toolkit.cli import main
    monkeypatch.setattr("cuvil_tir.target.cache._warned", set())
    monkeypatch.delenv("CUVIL_CACHE", raising=False)
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    folder = {"file": blocker, "under-file": blocker / "sub"}.get(setting, tmp_path / "c")
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(folder))
    if setting.startswith("max="):
        monkeypatch.setenv("CUVIL_CACHE_MAX_BYTES", setting[4:])
    info = targets.cache.info()
    assert (info["state"], info["enabled"]) == ("off", False)
    assert re.fullmatch(why + ".*", info["why"])
    with pytest.warns(UserWarning, match="compile cache off: " + why):
        mod = targets.build(_func())
    _check(mod)
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # once: the second build is quiet
        assert not targets.build(_func()).from_cache
    assert main(["cache", "info"]) == 0
    assert re.search(r"state: +off \(" + why, capsys.readouterr().out)


def test_cache_info_says_on_and_off_by_the_switch(cache_dir, monkeypatch, capsys):
    from targets.toolkit.cli import main
    main(["cache", "info"])
    assert re.search(r"state: +on\n", capsys.readouterr().out)
    monkeypatch.setenv("CUVIL_CACHE", "off")
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # the user's own choice: no warning
        assert not targets.build(_func()).from_cache
    main(["cache", "info"])
    assert re.search(r"state: +off \(CUVIL_CACHE=off\)", capsys.readouterr().out)


_WORKER = textwrap.dedent("""
    import sys, numpy as np, cuvil_tir as T, targets
    worker = int(sys.argv[1])
    hits = 0
    for r in range(6):
        scale = float((worker + r) % 4 + 1)       # overlapping kernels across workers
        n = 32 + 8 * ((worker + r) % 3)
        A = T.placeholder((n,), name="A")
        f = T.create_prim_func([A, T.compute((n,), lambda i: A[i] * scale, name="B")])
        mod = targets.build(f)
        a, b = np.arange(n, dtype="float32"), np.zeros(n, "float32")
        mod(a, b)
        if not (b == a * scale).all():
            print("WRONG", scale, n); sys.exit(1)
        hits += mod.from_cache
    print("ok", hits)
""")


def test_eight_processes_build_overlapping_kernels_at_once(cache_dir):
    env = {**os.environ, "PYTHONPATH": ROOT}
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(w)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(8)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [e for _, e in outs]
    assert all(o.startswith("ok") for o, _ in outs)
    assert sum(int(o.split()[1]) for o, _ in outs) > 0               # they shared entries
    entries = [n for _, _, names in os.walk(cache_dir) for n in names]
    assert len(entries) == 12 and all(n.endswith(".cvl") for n in entries)


def test_an_edited_compiler_misses(cache_dir, monkeypatch):
    from cuvil_tir.target.cache import entries
    targets.build(_func())
    assert targets.build(_func()).from_cache
    monkeypatch.setattr(entries, "code_identity", lambda: "0" * 64)   # Cuvil's code changed
    assert not targets.build(_func()).from_cache
