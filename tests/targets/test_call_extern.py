"""T.call_extern on buffer regions: built, printed, parsed, lowered and run on llvm and c."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from targets.cstyle import CPrinter


def _row_copy():
    """B[i, :] = A[i, :] through the C library's memcpy, one call per row."""
    A = T.decl_buffer((4, 16), "float32", "A")
    B = T.decl_buffer((4, 16), "float32", "B")
    i = T.var("i")
    call = T.call_extern("handle", "memcpy", B[i, 0:16], A[i, 0:16], T.const(64, "int64"))
    return T.PrimFunc([A, B], T.For(i, T.const(0), T.const(4), "serial", T.Evaluate(call)))


def test_buffer_slices_are_regions():
    A = T.decl_buffer((4, 16), "float32", "A")
    r = A[1, 2:]
    assert isinstance(r, T.BufferRegion) and r.buffer is A
    assert [(int(x.min), int(x.extent)) for x in r.region] == [(1, 1), (2, 14)]
    with pytest.raises(T.ShapeError, match="a region slice has no step"):
        A[0, 0:16:2]


def test_prints_and_parses_back():
    f = _row_copy()
    text = str(f)
    assert 'T.call_extern("handle", "memcpy", B[i:i + 1, 0:16], A[i:i + 1, 0:16], ' \
           "T.int64(64))" in text
    assert T.structural_equal(T.parse(text), f)
    eff = T.call_extern("int32", "dma", T.const(1), effect="reads")
    assert T.structural_equal(T.parse(str(T.PrimFunc([], T.Evaluate(eff)))),
                              T.PrimFunc([], T.Evaluate(eff)))
    assert 'effect="reads"' in str(T.PrimFunc([], T.Evaluate(eff)))


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_runs_through_lowering_on_both_cpu_targets(target):
    mod = targets.build(_row_copy(), target)
    assert [p.writes for p in mod.signature.params] == [True, True]   # opaque: may write
    a = np.arange(64, dtype="float32").reshape(4, 16)
    b = np.zeros((4, 16), "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a)
    src = mod.get_source()
    if target == "c":
        assert "memcpy(&B[i * 16], &A[i * 16], INT64_C(64))" in src
        assert "extern void * memcpy(void *, void *, int64_t);" in src
    else:
        assert "declare ptr @memcpy(ptr, ptr, i64)" in src


def test_a_header_can_declare_the_externs():
    class WithHeader(CPrinter):
        declare_externs = False

    src = WithHeader().print_function(T.lower(_row_copy()))
    assert "extern" not in src and "memcpy(&B[" in src


def test_refused_arguments():
    with pytest.raises(T.DTypeError, match="the function name must be an identifier"):
        T.call_extern("int32", "not a name")
    with pytest.raises(T.DTypeError, match="effect must be one of pure, reads"):
        T.call_extern("int32", "f", effect="sometimes")
    with pytest.raises(T.DTypeError, match="argument 0 must be an expression, a buffer "
                                           "region or a buffer, found object"):
        T.call_extern("int32", "f", object())


def test_the_interpreter_says_it_cannot_run_an_extern():
    a = np.zeros((4, 16), "float32")
    with pytest.raises(T.LoweringError, match="T.call_extern of 'memcpy' calls a function "
                                              "of the target"):
        T.interpret(_row_copy(), a, a.copy())


def _undefined_call():
    """One call of a function no library in the process defines."""
    A = T.decl_buffer((4,), "float32", "A")
    call = T.call_extern("int32", "cuvil_test_undefined_fn", A[0:4])
    return T.PrimFunc([A], T.Evaluate(call))


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_an_undefined_extern_is_a_build_error_not_a_crash(target):
    # the call used to jump to address 0 (llvm) or fail in ctypes with a bare OSError
    with pytest.raises(targets.CodegenError, match=f"{target}: the .* calls the external "
                                                   "function 'cuvil_test_undefined_fn', "
                                                   "which no library loaded into this "
                                                   "process defines"):
        targets.build(_undefined_call(), target)


def test_llvm_object_code_calling_an_undefined_extern_is_refused_when_loaded():
    # a cached object (compiled elsewhere) is checked against this process too
    import llvmlite.binding as llvm

    from targets.llvm.engine import Library, host_cpu, target_machine
    source = ("declare i32 @cuvil_test_undefined_fn()\n"
              "define i32 @f() {\n  %r = call i32 @cuvil_test_undefined_fn()\n"
              "  ret i32 %r\n}\n")
    obj = target_machine(host_cpu(), "").emit_object(llvm.parse_assembly(source))
    with pytest.raises(targets.CodegenError, match="llvm: the module calls the external "
                                                   "function 'cuvil_test_undefined_fn'"):
        Library(source, cpu=host_cpu(), object_code=obj)


def test_llvm_object_path_checks_only_the_calls_the_machine_code_keeps():
    # a declaration whose calls the optimiser removed is no reason to refuse the build
    from targets.llvm.engine import Library, host_cpu
    source = ("declare i32 @cuvil_test_undefined_fn()\n"
              "define i32 @f() {\n  ret i32 1\n}\n")
    lib = Library(source, cpu=host_cpu())
    assert lib.address("f") != 0
