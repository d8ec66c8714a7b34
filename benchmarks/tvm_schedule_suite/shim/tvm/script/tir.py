"""``from tvm.script import tir as T``: Cuvil's text-form namespace under TVM's name.

Inside a ``@T.prim_func`` function Cuvil's parser gives every ``T.<name>`` its meaning
(this module is marked as the namespace for it); outside, names fall through to
``cuvil_tir``.  A function Cuvil cannot parse becomes an :class:`Unparsed` value, so
that only the cases using it fail (as "unsupported"), not the whole file.
"""

from __future__ import annotations

import builtins
import inspect
import sys
import textwrap

import cuvil_tir
from cuvil_tir.errors import CuvilError
from cuvil_tir.parser import parse
from cuvil_tir.parser import _Env as Env
from cuvil_tir.parser.evaluate import Spec

#: Cuvil's parser treats a module with this flag as ``T``
__tvmscript_namespace__ = True


class ParseFailure(Exception):
    """A ``@T.prim_func`` or ``@I.ir_module`` that Cuvil's parser refused, now used."""


class Unparsed:
    """A function Cuvil could not parse: every use raises :class:`ParseFailure`."""

    def __init__(self, name: str, error: Exception):
        self.__name__ = name
        self.error = error

    def _fail(self, *args, **kwargs):
        raise ParseFailure(f"{self.__name__} did not parse: {self.error}") from None

    __call__ = __getitem__ = __iter__ = _fail

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._fail()

    def __repr__(self):
        return f"<unparsed {self.__name__}>"


def _source(fn):
    lines, start = inspect.getsourcelines(fn)
    src = "".join(lines)
    text = textwrap.dedent(src)
    indent = (len(src) - len(src.lstrip())) - (len(text) - len(text.lstrip()))
    return text, inspect.getsourcefile(fn), start - 1, indent


def parse_function(fn, caller_locals: dict):
    """``fn`` (a decorated Python function or class) parsed by Cuvil, or :class:`Unparsed`."""
    closure = {}
    for name, cell in zip(fn.__code__.co_freevars if hasattr(fn, "__code__") else (),
                          getattr(fn, "__closure__", None) or ()):
        try:
            closure[name] = cell.cell_contents
        except ValueError:
            continue
    glob = getattr(fn, "__globals__", None)
    if glob is None:
        glob = sys.modules[fn.__module__].__dict__
    env = Env([closure, caller_locals, glob, vars(builtins)])
    try:
        text, filename, line, col = _source(fn)
        return parse(text, filename, env=env, line_offset=line, col_offset=col)
    except (CuvilError, RecursionError) as err:
        return Unparsed(fn.__name__, err)


def prim_func(fn=None, *, private: bool = False, check_well_formed: bool = True):
    """TVM's decorator (also as ``@T.prim_func(private=True)``)."""
    caller = dict(sys._getframe(1).f_locals)

    def deco(f):
        return parse_function(f, caller)
    return deco if fn is None else deco(fn)


class _Annotation:
    """A ``T.Buffer(...)`` annotation Python evaluated (the parser reads the text)."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def Buffer(*args, **kwargs):
    """``T.Buffer(shape, dtype, ...)`` in Python: Cuvil's buffer when it can be one.

    Python evaluates a parameter's annotation before the decorator runs; a buffer
    Cuvil refuses (e.g. ``axis_separators``) must fail the cases, not the import.
    Called from a Python helper inside a function being parsed, with ``data=`` (the
    result of ``T.allocate_const``), it is the parser's declaration."""
    if "data" in kwargs:
        return decl_buffer(*args, **kwargs)
    try:
        return cuvil_tir.Buffer(*args, **kwargs)
    except (CuvilError, TypeError, ValueError):
        return _Annotation(*args, **kwargs)


def decl_buffer(*args, **kwargs):
    """``T.decl_buffer`` called from Python code that the parser runs (a helper function
    a TVM test calls inside its ``@T.prim_func``): the parser's declaration spec."""
    return Spec("decl_buffer", args, kwargs)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(cuvil_tir, name)
