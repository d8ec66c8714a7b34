"""``tvm.ir``: modules and structural equality."""

from cuvil_tir import IRModule
from cuvil_tir import structural_equal as _structural_equal
from cuvil_tir import structural_hash as _structural_hash

from ._compare import as_func, assert_equal, normalise
from ._gap import module_getattr


# TVM's spelling of a one-function module (only in the shim's process)
IRModule.from_expr = staticmethod(lambda func: IRModule.from_func(func))
# a GlobalVar is its name here (Schedule.func_working_on gives the name)
IRModule.get_global_var = lambda self, name: self[name].name


def assert_structural_equal(lhs, rhs, map_free_vars: bool = False) -> None:
    assert_equal(lhs, rhs)


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    return _structural_equal(normalise(as_func(lhs)), normalise(as_func(rhs)))


def structural_hash(node, map_free_vars: bool = False) -> int:
    return _structural_hash(normalise(as_func(node)))


__getattr__ = module_getattr("tvm.ir")

__all__ = ["IRModule", "assert_structural_equal", "structural_equal", "structural_hash"]
