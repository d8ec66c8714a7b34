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
    """TVM's before/after test base: ``transform()(before)`` must equal ``expected``.

    As in TVM, ``before``, ``expected`` and ``transform`` become fixtures of the class
    when it is defined, so that the parameters they use (``pad_value`` ...) parametrise
    ``test_compare``: a plain function in the class body is TVMScript (its parameters
    are the PrimFunc's), a method is called, a fixture stays one, any other value is
    returned as it is (a PrimFunc, or the exception ``transform`` must raise)."""

    check_well_formed = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in ("before", "expected", "transform"):
            if name in vars(cls):
                setattr(cls, name, _as_fixture(cls, name, vars(cls)[name]))

    def test_compare(self, before, expected, transform):
        from .._compare import assert_equal
        if isinstance(expected, type) and issubclass(expected, Exception):
            with pytest.raises(expected):
                transform(before)
            return
        assert_equal(transform(before), expected)


def _as_fixture(cls, name, raw):
    # (no hasattr: an unparsed function raises on any attribute it lacks)
    if type(raw).__name__ == "FixtureFunctionDefinition" or \
            "_pytestfixturefunction" in getattr(raw, "__dict__", {}):
        return raw
    if inspect.isfunction(raw) and "self" in inspect.signature(raw).parameters:
        return pytest.fixture(name=name)(lambda self: raw(self))
    if inspect.isfunction(raw) and name != "transform":
        from ..script.tir import parse_function
        scope = {}
        for c in reversed(cls.__mro__):
            scope.update(vars(c))
        parsed = parse_function(raw, scope)
        return pytest.fixture(name=name)(lambda self: parsed)
    return pytest.fixture(name=name)(lambda self: raw)


__getattr__ = module_getattr("tvm.testing")
