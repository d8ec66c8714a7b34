"""Index expressions evaluated on numpy arrays of every point (``transform_layout``
checks a map one-to-one by enumeration, block predicates are checked the same way, and
the block region check takes exact bounds of small loop nests this way).

Example::

    >>> i = Var("i")
    >>> eval_np(i * 3 % 4, {id(i): np.arange(4)}).tolist()
    [0, 3, 2, 1]
"""

from __future__ import annotations

import numpy as np

from ..expr import (EQ, GE, GT, LE, LT, NE, Add, And, Call, FloorDiv, FloorMod,
                            IntImm, Max, Min, Mul, Not, Or, Sub, Var)

_NP = {Add: np.add, Sub: np.subtract, Mul: np.multiply, FloorDiv: np.floor_divide,
       FloorMod: np.mod, Min: np.minimum, Max: np.maximum, EQ: np.equal, NE: np.not_equal,
       LT: np.less, LE: np.less_equal, GT: np.greater, GE: np.greater_equal,
       And: np.logical_and, Or: np.logical_or}


def eval_np(e, env):
    """Evaluate an integer index expression or a condition on numpy arrays (``env``:
    ``{id(var): array}``); None if it uses anything else.

    Example::

        >>> i = Var("i")
        >>> eval_np((i * 2 < 5) & (i >= 1), {id(i): np.arange(4)}).tolist()
        [False, True, True, False]
    """
    return _eval_np(e, env)


#: bitwise intrinsics an index map may use (an XOR swizzle, cuvil_tir.swizzle)
_NP_CALLS = {"bitwise_xor": np.bitwise_xor, "bitwise_and": np.bitwise_and,
             "bitwise_or": np.bitwise_or, "shift_left": np.left_shift,
             "shift_right": np.right_shift}


def _eval_np(e, env):
    if isinstance(e, IntImm):
        return np.int64(e.value)
    if isinstance(e, Var):
        return env.get(id(e))
    if isinstance(e, Call):
        fn = _NP_CALLS.get(e.op)
        args = [_eval_np(a, env) for a in e.args] if fn is not None else [None]
        return None if any(a is None for a in args) else fn(*args)
    if isinstance(e, Not):
        a = _eval_np(e.a, env)
        return None if a is None else np.logical_not(a)
    fn = _NP.get(type(e))
    if fn is None:
        return None
    a, b = _eval_np(e.a, env), _eval_np(e.b, env)
    if a is None or b is None:
        return None
    if fn in (np.floor_divide, np.mod) and np.any(b == 0):
        return None
    return fn(a, b)


__all__ = ["eval_np"]
