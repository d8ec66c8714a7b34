"""The text form's parser: ``T.parse(text)`` and the ``@T.prim_func`` decorator.

The grammar (``tir.lark``, a Python subset with Python indentation) is parsed by lark's
LALR parser; :mod:`.builder` turns the tree into IR with the ordinary constructors.
``T.parse(str(f))`` is structurally equal to ``f`` for every function ``f``.

Example::

    >>> import cuvil_tir as T
    >>> @T.prim_func
    ... def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    ...     for i in T.serial(8):
    ...         with T.block("B"):
    ...             vi = T.axis.spatial(8, i)
    ...             B[vi] = A[vi] + T.float32(1)
    >>> add_one.name, T.structural_equal(T.parse(str(add_one)), add_one)
    ('add_one', True)
"""

from __future__ import annotations

import builtins
import inspect
import textwrap

from ..errors import ParseError
from ..deep import deep_ok
from ..function import PrimFunc
from .builder import Builder
from .evaluate import NAMESPACE
from .grammar import parse_tree
from .module import build_module, ir_module, module_attrs


@deep_ok
def parse(text: str, filename: str | None = None, *, env: dict | None = None,
          line_offset: int = 0, col_offset: int = 0):
    """Parse the text form of one function (what ``print(func)`` shows) into a
    PrimFunc, or of a module (``@T.ir_module class ...``, what ``print(mod)`` shows)
    into an :class:`~cuvil_tir.IRModule`.

    ``env`` maps free names to Python values (``T`` is always the Cuvil namespace);
    ``line_offset``/``col_offset`` shift error positions for text taken from a file.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.parse("def f(A: T.Buffer((4,), 'float32')):\\n    A[0] = T.float32(1)\\n")
        >>> f.name, f.params[0].shape[0].value
        ('f', 4)
    """
    if not isinstance(text, str):
        raise ParseError(f"T.parse expects the text of a function, found "
                         f"{type(text).__name__}; to get a PrimFunc from a Python "
                         f"function, decorate it with @T.prim_func")
    tree = parse_tree(text, filename, line_offset, col_offset)
    scope = {"T": NAMESPACE} if env is None else env

    def make_builder():
        return Builder(scope, text, filename, line_offset, col_offset)
    if tree.children and tree.children[-1].data == "classdef":
        return build_module(tree.children[-1], make_builder)
    return make_builder().function(tree)


class _Env(dict):
    """Free names of a decorated function: closure, then caller locals, globals, builtins."""

    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    def __contains__(self, name):
        return any(name in layer for layer in self.layers)

    def __getitem__(self, name):
        for layer in self.layers:
            if name in layer:
                return layer[name]
        raise KeyError(name)

    def __iter__(self):
        seen = set()
        for layer in self.layers:
            for k in layer:
                if k not in seen:
                    seen.add(k)
                    yield k


def prim_func(fn) -> PrimFunc:
    """Decorator: parse a Python function written in the text form into a PrimFunc.

    Free names come from the function's closure, the caller's locals (so a size used
    only in an annotation is found), its globals and builtins.  The function's name
    becomes the ``global_symbol``; errors point into the function's source file.

    Example::

        >>> import cuvil_tir as T
        >>> N = 16
        >>> @T.prim_func
        ... def scale(A: T.Buffer((N,), "float32")):
        ...     for i in T.serial(N):
        ...         A[i] = A[i] * T.float32(2)
        >>> scale.body.extent.value
        16
    """
    if isinstance(fn, PrimFunc):
        return fn
    try:
        lines, start = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn)
    except (OSError, TypeError) as err:
        raise ParseError(f"@T.prim_func needs the function's source code ({err}); define "
                         "it in a file, or use T.parse(text)") from None
    src = "".join(lines)
    text = textwrap.dedent(src)
    col_offset = _indent(src) - _indent(text)
    closure = {}
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                continue
    caller = inspect.currentframe().f_back
    local = dict(caller.f_locals) if caller is not None else {}
    env = _Env([closure, local, fn.__globals__, vars(builtins)])
    return parse(text, filename, env=env, line_offset=start - 1, col_offset=col_offset)


def _indent(text: str) -> int:
    for line in text.splitlines():
        if line.strip():
            return len(line) - len(line.lstrip())
    return 0


__all__ = ["parse", "prim_func", "ir_module", "module_attrs", "ParseError"]
