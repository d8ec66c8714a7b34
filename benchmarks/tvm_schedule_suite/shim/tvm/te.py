"""``tvm.te``: Cuvil's tensor-expression layer under TVM's names."""

from cuvil_tir import const, compute, create_prim_func, placeholder, reduce_axis, size_var, var
from cuvil_tir import max as max  # noqa: PLW0127
from cuvil_tir import min as min
from cuvil_tir import sum as sum

from schedules import AXIS_SEPARATOR

from ._gap import module_getattr

__getattr__ = module_getattr("tvm.te")

__all__ = ["const", "compute", "create_prim_func", "placeholder", "reduce_axis", "size_var",
           "var", "max", "min", "sum", "AXIS_SEPARATOR"]
