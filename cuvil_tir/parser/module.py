"""Modules in the text form: ``@T.ir_module`` classes of ``@T.prim_func`` functions.

The text form of an :class:`~cuvil_tir.IRModule` (what ``print(mod)`` shows) is a
class whose body holds an optional ``T.module_attrs({...})`` line and the functions;
each function is parsed on its own, exactly as ``T.parse`` parses one function.  The
same class written in Python is turned into a module by the :func:`ir_module`
decorator.

Example::

    >>> import cuvil_tir as T
    >>> @T.ir_module
    ... class Module:
    ...     T.module_attrs({"entry": "main"})
    ...     @T.prim_func
    ...     def main(A: T.Buffer((4,), "float32")):
    ...         A[0] = T.float32(1)
    >>> Module.names, Module.attr("entry")
    (('main',), 'main')
"""

from __future__ import annotations

import inspect

from lark import Tree

from ..errors import LoweringError, ParseError
from ..function import PrimFunc
from ..ir_module import IRModule

#: where ``T.module_attrs`` leaves its dict in a Python class body
_ATTRS_KEY = "__cuvil_module_attrs__"


def module_attrs(attrs: dict) -> dict:
    """``T.module_attrs({...})``: the attributes of the module whose class body holds
    this line (in Python, the :func:`ir_module` decorator reads them).

    Example::

        >>> module_attrs({"entry": "f"})
        {'entry': 'f'}
    """
    if not isinstance(attrs, dict):
        raise ParseError(f"T.module_attrs: expected a dict of attributes, found "
                         f"{type(attrs).__name__}")
    caller = inspect.currentframe().f_back
    if caller is not None and "__qualname__" in caller.f_locals and \
            "__module__" in caller.f_locals:
        caller.f_locals[_ATTRS_KEY] = dict(attrs)   # a class body's namespace
    return attrs


def ir_module(cls) -> IRModule:
    """Decorator: the ``@T.prim_func`` functions of a class, in order, as a module.

    Example::

        >>> import cuvil_tir as T
        >>> @T.ir_module
        ... class Mod:
        ...     @T.prim_func
        ...     def f(A: T.Buffer((2,), "int32")):
        ...         A[1] = 0
        >>> Mod["f"].name
        'f'
    """
    if isinstance(cls, IRModule):
        return cls
    if not isinstance(cls, type):
        raise ParseError(f"@T.ir_module decorates a class of @T.prim_func functions, found "
                         f"{type(cls).__name__}")
    funcs = [v for v in vars(cls).values() if isinstance(v, PrimFunc)]
    if not funcs:
        raise ParseError(f"@T.ir_module class {cls.__name__} has no @T.prim_func function")
    return IRModule(funcs, vars(cls).get(_ATTRS_KEY, {}))


def build_module(classdef: Tree, make_builder) -> IRModule:
    """The module of a parsed ``classdef`` tree; ``make_builder()`` gives a fresh
    builder per function (names are scoped by function) and for the attribute line."""
    funcs, attrs = [], {}
    for member in classdef.children[1:]:
        if member.data == "decorated":
            funcs.append(make_builder().function(member))
            continue
        call = _call_of(member)
        value = make_builder().eval(call) if call is not None else None
        if not isinstance(value, dict):
            raise make_builder().error("a module's body holds T.module_attrs({...}) and "
                                       "@T.prim_func functions only", member)
        attrs = value
    try:
        return IRModule(funcs, attrs)
    except LoweringError as err:
        raise make_builder().error(str(err), classdef) from None


def _call_of(member: Tree):
    if member.data == "expr_stmt" and member.children and \
            isinstance(member.children[0], Tree) and member.children[0].data == "call":
        return member.children[0]
    return None
