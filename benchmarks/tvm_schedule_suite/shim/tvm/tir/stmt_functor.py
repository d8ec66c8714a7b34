"""``tvm.tir.stmt_functor``: Cuvil's visitors under TVM's names."""

from cuvil_tir.visitor import post_order_visit

from .._gap import module_getattr

__getattr__ = module_getattr("tvm.tir.stmt_functor")

__all__ = ["post_order_visit"]
