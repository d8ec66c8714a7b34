"""``tvm.testing``: pytest helpers (parameters, fixtures, main) and hardware marks."""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest

from .._gap import OutOfScope, module_getattr


def main() -> None:
    sys.exit(pytest.main([sys.argv[0]]))


class _Parameter:
    """A value list that the plugin turns into a parametrised fixture."""

    def __init__(self, values, ids=None):
        self.values = list(values)
        self.ids = ids


def parameter(*values, ids=None, by_dict=None):
    if by_dict is not None:
        return _Parameter(by_dict.values(), list(by_dict))
    return _Parameter(values, ids)


def fixture(func=None, *, cache_return_value=False):
    if func is None:
        return lambda f: pytest.fixture(f)
    return pytest.fixture(func)


def assert_allclose(actual, desired, rtol=1e-7, atol=0):
    np.testing.assert_allclose(_np(actual), _np(desired), rtol=rtol, atol=atol)


def _np(x):
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def _out_of_scope(reason):
    """A hardware requirement: the plugin counts such a case out of scope."""
    def mark(*args, **kwargs):
        def deco(f):
            return pytest.mark.tvm_out_of_scope(reason)(f)
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return deco(args[0])
        return deco
    return mark


requires_cuda = _out_of_scope("needs CUDA")
requires_gpu = _out_of_scope("needs a GPU")
requires_cuda_compute_version = _out_of_scope("needs CUDA")
requires_matrixcore = _out_of_scope("needs ROCm matrix cores")
requires_rocm = _out_of_scope("needs ROCm")
requires_hexagon = _out_of_scope("needs Hexagon")


class CompareBeforeAfter:
    """TVM's before/after test base: ``transform()(before)`` must equal ``expected``."""

    check_well_formed = True

    def test_compare(self, request):
        from .._compare import assert_equal
        before, expected, transform = (_member(self, request, n)
                                       for n in ("before", "expected", "transform"))
        if isinstance(expected, type) and issubclass(expected, Exception):
            with pytest.raises(expected):
                transform(before)
            return
        assert_equal(transform(before), expected)


def _member(obj, request, name):
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        pass
    raw = next((vars(c)[name] for c in type(obj).__mro__ if name in vars(c)), None)
    if name in ("before", "expected") and inspect.isfunction(raw) and \
            "self" not in inspect.signature(raw).parameters:
        # as TVM does: a plain function in the class body is TVMScript (its
        # parameters are the PrimFunc's), parsed with the class body's names in scope
        from ..script.tir import parse_function
        scope = {}
        for c in reversed(type(obj).__mro__):
            scope.update(vars(c))
        return parse_function(raw, scope)
    value = getattr(obj, name)
    if callable(value) and hasattr(value, "__self__"):
        return value()
    return value


__getattr__ = module_getattr("tvm.testing")
