"""The ``cuvil`` command, run as a subprocess like a user would."""

import re
import subprocess
import sys
import textwrap

import pytest

import cuvil_tir as T

KERNEL_PY = textwrap.dedent('''
    import cuvil_tir as T

    N = 16

    @T.prim_func
    def add_one(A: T.Buffer((N,), "float32"), B: T.Buffer((N,), "float32")):
        for i in T.serial(N):
            with T.block("B"):
                vi = T.axis.spatial(N, i)
                B[vi] = A[vi] + T.float32(1)
''')


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "targets.toolkit", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.fixture
def kernel_py(tmp_path):
    p = tmp_path / "kernel.py"
    p.write_text(KERNEL_PY)
    return p


@pytest.fixture
def kernel_tir(tmp_path):
    A = T.placeholder((8, 8), name="A")
    k = T.reduce_axis((0, 8), name="k")
    S = T.compute((8,), lambda i: T.sum(A[i, k], axis=k), name="S")
    p = tmp_path / "rowsum.tir"
    p.write_text(str(T.create_prim_func([A, S], name="rowsum")))
    return p


def test_show_py(kernel_py):
    r = run_cli("show", str(kernel_py))
    assert r.returncode == 0, r.stderr
    assert "def add_one(A: T.Buffer((16,), \"float32\")" in r.stdout
    assert 'with T.block("B"):' in r.stdout


def test_show_tir(kernel_tir):
    r = run_cli("show", str(kernel_tir))
    assert r.returncode == 0, r.stderr
    assert "def rowsum(" in r.stdout and "with T.init():" in r.stdout


def test_lower_prints_loops_without_blocks(kernel_tir):
    r = run_cli("lower", str(kernel_tir), "--target", "llvm")
    assert r.returncode == 0, r.stderr
    assert "T.block" not in r.stdout
    assert "for i in" in r.stdout


def test_build_emit_asm_and_ll(kernel_py, tmp_path):
    out = tmp_path / "k.s"
    r = run_cli("build", str(kernel_py), "--target", "llvm", "--emit", "asm", "-o", str(out))
    assert r.returncode == 0, r.stderr
    asm = out.read_text()
    assert "add_one" in asm and ("ret" in asm)
    r = run_cli("build", str(kernel_py), "--emit", "ll")
    assert r.returncode == 0, r.stderr
    assert "define" in r.stdout and "add_one" in r.stdout


def test_run_random_inputs_prints_checksums(kernel_py):
    r = run_cli("run", str(kernel_py), "--target", "llvm", "--random-inputs", "--repeat", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    a_sum = float(lines[0].split("checksum=")[1])
    b_sum = float(lines[1].split("checksum=")[1])
    assert b_sum == pytest.approx(a_sum + 16, rel=1e-4, abs=1e-3)
    assert "time: median" in r.stdout


def test_pass_timing_and_dump_ir(kernel_tir, tmp_path):
    dump = tmp_path / "dump"
    r = run_cli("lower", str(kernel_tir), "--pass-timing", "--dump-ir", str(dump))
    assert r.returncode == 0, r.stderr
    assert "lower_blocks" in r.stderr
    files = sorted(p.name for p in dump.iterdir())
    assert files and any("lower_blocks" in f for f in files)


@pytest.mark.parametrize("sub", ["show", "lower", "build", "run"])
def test_every_subcommand_has_help(sub):
    r = run_cli(sub, "--help")
    assert r.returncode == 0
    assert "--pass-timing" in r.stdout and "--dump-ir" in r.stdout


def test_bad_input_exits_nonzero_with_code(tmp_path):
    bad = tmp_path / "bad.tir"
    bad.write_text("@T.prim_func\ndef f(A: T.Buffer((4,), \"float32\")):\n    A[0] = B[0]\n")
    r = run_cli("show", str(bad))
    assert r.returncode == 1
    assert "CVL-E108" in r.stderr and "B" in r.stderr


def test_missing_file_exits_nonzero(tmp_path):
    r = run_cli("show", str(tmp_path / "nope.tir"))
    assert r.returncode == 1
    assert "No such file" in r.stderr


@pytest.mark.parametrize("fmt,needle", [("ll-opt", "define"), ("tir", "for i in"),
                                        (None, "define")])
def test_build_emits_every_format_the_target_offers(kernel_py, fmt, needle):
    # before: ll-opt was refused by argparse although the llvm module offers it
    r = run_cli("build", str(kernel_py), *(("--emit", fmt) if fmt else ()))
    assert r.returncode == 0, r.stderr
    assert needle in r.stdout


def test_build_emit_c_on_the_c_target(kernel_py):
    # before: --emit c always failed (the llvm module was asked for C)
    r = run_cli("build", str(kernel_py), "--target", "c", "--emit", "c")
    assert r.returncode == 0, r.stderr
    assert "add_one" in r.stdout and "for (" in r.stdout


def test_build_emit_format_the_target_lacks_lists_what_it_offers(kernel_py):
    r = run_cli("build", str(kernel_py), "--emit", "cuda")
    assert r.returncode == 1
    assert "CVL-E106" in r.stderr
    assert "target 'llvm' has no source format 'cuda'; it offers ll, " in r.stderr


def test_build_writes_a_binary_format_to_a_file(kernel_py, tmp_path, capsys):
    import targets
    from targets.toolkit.cli import main

    llvm = targets.get_target_kind("llvm")

    class _Binary:
        source_formats = ("bin", "ll")

        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def get_source(self, fmt=None):
            return b"\x7fBIN" if fmt in (None, "bin") else self.inner.get_source(fmt)

    class BinKind(type(llvm)):
        name = "cli-test-bin"

        def load(self, program, target):
            inner = super().load(program, target).runtime
            return targets.Module(_Binary(inner), program, target)

    targets.register_target(BinKind(), replace=True)
    try:
        assert main(["build", str(kernel_py), "--target", "cli-test-bin"]) == 1
        assert "binary data; give an output file with -o" in capsys.readouterr().err
        out = tmp_path / "k.bin"
        assert main(["build", str(kernel_py), "--target", "cli-test-bin", "-o",
                     str(out)]) == 0
        assert out.read_bytes() == b"\x7fBIN"
    finally:
        targets.unregister_target("cli-test-bin")


def test_run_without_random_inputs_flag_uses_random_inputs(kernel_py):
    # before: "cuvil run needs --random-inputs"
    r = run_cli("run", str(kernel_py), "--repeat", "1", "--seed", "3")
    assert r.returncode == 0, r.stderr
    a_sum = float(r.stdout.splitlines()[0].split("checksum=")[1])
    b_sum = float(r.stdout.splitlines()[1].split("checksum=")[1])
    assert b_sum == pytest.approx(a_sum + 16, rel=1e-4, abs=1e-3)


def test_run_with_a_scalar_parameter_says_why_it_cannot(tmp_path):
    p = tmp_path / "scale.py"
    p.write_text(textwrap.dedent('''
        import cuvil_tir as T

        @T.prim_func
        def scale(A: T.Buffer((4,), "float32"), s: T.float32):
            for i in T.serial(4):
                A[i] = A[i] * s
    '''))
    r = run_cli("run", str(p))
    assert r.returncode == 1
    assert "scalar parameter 's' needs a value" in r.stderr


@pytest.mark.parametrize("args,message", [
    (["--repeat", "0"], r"CVL-E107: benchmark: expected repeat >= 1"),
    (["--size", "-1"], r"CVL-E106: cuvil run: --size must be >= 0"),
])
def test_run_bad_numbers_are_coded_errors(kernel_py, args, message):
    # before: --repeat 0 ended in a ValueError traceback
    r = run_cli("run", str(kernel_py), *args)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert re.search(message, r.stderr)


def test_binary_input_file_is_a_parse_error(tmp_path):
    p = tmp_path / "k.tir"
    p.write_bytes(b"\x00\xff\xfe")
    r = run_cli("show", str(p))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "CVL-E108" in r.stderr and "is not UTF-8 text" in r.stderr


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    from targets.toolkit.cli import main
    import cuvil_tir as T
    import targets
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path))
    A = T.placeholder((4,), name="A")
    targets.build(T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")]))
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"directory: {tmp_path}" in out and "entries:   1" in out and "state:     on" in out
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == "removed 1 entries\n"


def test_dump_on_fail_flag(tmp_path, capsys):
    from targets.toolkit.cli import main
    src = tmp_path / "k.tir"
    src.write_text('@T.prim_func\ndef k(A: T.Buffer((4,), "float32")):\n'
                   '    for i in T.serial(4):\n        A[i] = A[i] + T.float32(1)\n')
    code = main(["build", str(src), "--target", "llvm -mcpu=nosuchcpu",
                 "--dump-on-fail", str(tmp_path / "dumps")])
    err = capsys.readouterr().err
    assert code == 1 and "LLVM cannot compile for mcpu='nosuchcpu'" in err
    assert "was written to" in err and len(list((tmp_path / "dumps").iterdir())) == 1


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    # `cuvil show big.tir | head -1`: more output than a pipe buffers, and a reader that
    # leaves after one line; the command stops without "Broken pipe" and with status 0
    A = T.decl_buffer((3000,), "float32", "A")
    body = T.seq(*[T.BufferStore(A, T.const(float(k), "float32"), (T.const(k),))
                   for k in range(3000)])
    path = tmp_path / "big.tir"
    path.write_text(str(T.PrimFunc([A], body)))
    proc = subprocess.Popen([sys.executable, "-m", "targets.toolkit", "show", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()                          # the reader goes away
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert first.startswith(b"@T.prim_func") and err == ""
