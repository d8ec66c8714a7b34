"""``from tvm.script import ir as I``: ``@I.ir_module`` over Cuvil's module parser."""

from __future__ import annotations

import sys

from cuvil_tir import IRModule, PrimFunc

from .tir import ParseFailure, Unparsed, parse_function


def ir_module(cls=None, *, check_well_formed: bool = True):
    """TVM's class decorator: a module of the class's ``@T.prim_func`` functions."""
    caller = dict(sys._getframe(1).f_locals)

    def deco(c):
        members = [v for v in vars(c).values() if isinstance(v, (PrimFunc, Unparsed))]
        bad = [m for m in members if isinstance(m, Unparsed)]
        if bad:
            return Unparsed(c.__name__, bad[0].error)
        if not members:
            return parse_function(c, caller)
        return IRModule(members)
    return deco if cls is None else deco(cls)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    from .._gap import gap
    return gap(f"tvm.script.ir.{name}")


__all__ = ["ir_module", "ParseFailure"]
