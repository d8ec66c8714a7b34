"""The buckets a TVM test case falls into, and how a failure is put in one.

A case's bucket comes from what it raised: the shim raises its own classes for a
missing TVM feature (:class:`ShimGap`), a missing primitive, a feature outside the
measurement (:class:`OutOfScope`), an IR that differs from TVM's expected one (with the
numeric verdict) and a trace that does not replay; Cuvil raises ``ScheduleError`` for a
refusal and ``ParseError`` for TVMScript it does not read.

Example::

    >>> classify("ScheduleError", ("ScheduleError", "CuvilError"), "split: ...", [])
    'refused'
    >>> classify("Failed", (), "DID NOT RAISE <class 'ScheduleError'>", [])
    'error_mismatch'
"""

from __future__ import annotations

#: bucket -> what it means, in report order
BUCKETS = {
    "passed": "passed",
    "refused": "refused by Cuvil (ScheduleError where TVM succeeds)",
    "error_mismatch": "expected-error mismatch (TVM raises, Cuvil accepts or raises "
                      "another error)",
    "wrong": "WRONG: structurally different and numerically different",
    "numeq": "structurally different, numerically equal",
    "unchecked": "structurally different, not comparable numerically",
    "assertion": "a test's own assertion fails",
    "trace": "trace round trip fails",
    "unsupported_parse": "unsupported: TVMScript Cuvil does not parse",
    "missing_primitive": "unsupported: a primitive Cuvil does not have",
    "unsupported_shim": "unsupported: a TVM API the shim does not map",
    "other_error": "another Cuvil error where TVM succeeds",
    "crash": "crash: a Python error inside Cuvil",
    "out_of_scope": "out of scope (CUDA/ROCm, TVM's C++ tensor intrinsics, meta_schedule)",
    "tvm_skip": "skipped or xfail in TVM itself",
}

#: buckets that do not count against the pass rate's in-scope denominator
EXCLUDED = ("out_of_scope", "tvm_skip")

#: directories whose frames make a plain Python error a Cuvil crash
CUVIL_PACKAGES = ("/cuvil_tir/", "/schedules/", "/targets/")


def classify(name: str, bases: tuple, message: str, files: list,
             expects_error: bool = False, verdict: str | None = None) -> str:
    """The bucket of a failing case from its exception's class ``name``, the names of
    its base classes, its ``message``, the files of its traceback (outer to inner),
    whether the test expects an error (``pytest.raises``) and, for a structural
    mismatch, the numeric ``verdict``.

    Example::

        >>> classify("KeyError", (), "'x'", ["/t/test_a.py", "/r/schedules/loops.py"])
        'crash'
        >>> classify("StructuralMismatch", (), "", [], verdict="wrong")
        'wrong'
    """
    kinds = (name,) + tuple(bases)
    if "OutOfScope" in kinds:
        return "out_of_scope"
    if "StructuralMismatch" in kinds:
        return verdict if verdict in ("wrong", "numeq", "unchecked") else "unchecked"
    if "TraceMismatch" in kinds:
        return "trace"
    if "ParseFailure" in kinds or "ParseError" in kinds:
        return "unsupported_parse"
    if "MissingPrimitive" in kinds:
        return "missing_primitive"
    if "ShimGap" in kinds:
        return "unsupported_shim"
    if "DID NOT RAISE" in message:
        return "error_mismatch"
    if "ScheduleError" in kinds:
        return "refused"
    if "CuvilError" in kinds:
        return "error_mismatch" if expects_error else "other_error"
    if name == "AssertionError":
        return "assertion"
    if files and any(p in files[-1] for p in CUVIL_PACKAGES):
        return "crash"
    return "unsupported_shim"


__all__ = ["BUCKETS", "EXCLUDED", "classify"]
