"""The reference interpreter: runs any PrimFunc on numpy arrays, exactly as the IR says.

The function is compiled once per call into nested Python closures
(:mod:`.exprs`, :mod:`.memory`, :mod:`.stmts`) with the dtype semantics of
:mod:`.scalar`, the arguments are checked and the symbolic sizes bound
(:mod:`.args`), and the closures run with numpy's floating-point warnings silenced
(overflow to ``inf`` and ``nan`` are results, not errors).

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> A = T.placeholder((4,), "int8", name="A")
    >>> B = T.compute((4,), lambda i: A[i] * 2, name="B")
    >>> a, b = np.array([1, 2, 64, 100], "int8"), np.zeros(4, "int8")
    >>> T.interpret(T.create_prim_func([A, B]), a, b)
    >>> b.tolist()
    [2, 4, -128, -56]
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np

from ..buffer import Buffer
from ..deep import deep_if_nested
from ..errors import DTypeError, ShapeError
from ..expr import Var
from ..function import PrimFunc
from ..ir_module import IRModule
from ..visitor import used_vars
from .args import SizeBinder, buffer_array, scalar_value
from .exprs import Frame
from .gpu import GpuStmtCompiler, has_thread_loops
from .stmts import StmtCompiler
from ..transform.inline import inline_launches
from ..transform.empty_reductions import write_empty_reductions


@deep_if_nested
def interpret(func, *arrays, check_races: bool = False) -> None:
    """Run ``func`` (a PrimFunc, or a module: its entry) on ``arrays`` (numpy arrays,
    Python numbers for scalar params).

    A function with loops bound to ``blockIdx``/``threadIdx`` runs with GPU semantics
    (:mod:`.gpu`); ``check_races=True`` then reports shared-memory races.
    Outputs are written into the arrays passed.  Wrong arguments raise
    :class:`~cuvil_tir.ShapeError` / :class:`~cuvil_tir.DTypeError`; an out-of-bounds
    access or ill-formed IR raises :class:`~cuvil_tir.LoweringError`.

    Example::

        >>> import numpy as np, cuvil_tir as T
        >>> A = T.placeholder((2, 3), name="A")
        >>> k = T.reduce_axis((0, 3), name="k")
        >>> S = T.compute((2,), lambda i: T.sum(A[i, k], axis=k), name="S")
        >>> s = np.zeros(2, "float32")
        >>> T.interpret(T.create_prim_func([A, S]), np.ones((2, 3), "float32"), s)
        >>> s.tolist()
        [3.0, 3.0]
    """
    if isinstance(func, IRModule):
        # a module runs its entry; a parallel launch runs as the loop it came from
        func = inline_launches(func)
    if not isinstance(func, PrimFunc):
        raise DTypeError(f"interpret: expected a PrimFunc or an IRModule, found "
                         f"{type(func).__name__}; build one with T.create_prim_func or "
                         "@T.prim_func")
    # the reference runs what every target lowers: an empty reduction writes its identity
    func = write_empty_reductions(func)
    params = func.params
    if len(arrays) != len(params):
        names = ", ".join(p.name for p in params)
        raise ShapeError(f"{func.name} takes {len(params)} argument(s) ({names}), "
                         f"found {len(arrays)}")
    frame = Frame()
    if has_thread_loops(func):
        c = GpuStmtCompiler(frame, check_races)
    else:
        c = StmtCompiler(frame)
    scalars = [p for p in params if isinstance(p, Var)]
    sizes = []
    for p in params:
        if isinstance(p, Buffer):
            for v in used_vars(p.shape):
                if all(v is not s for s in scalars + sizes):
                    sizes.append(v)
    with ExitStack() as stack:
        vslot = {id(v): stack.enter_context(c.binding(v)) for v in scalars + sizes}
        bslot = [stack.enter_context(c.buffer_binding(p)) if isinstance(p, Buffer)
                 else None for p in params]
        body = c.stmt(func.body)
        _bind_arguments(c, params, arrays, vslot, bslot)
    with np.errstate(all="ignore"):
        body()


def _bind_arguments(c, params, arrays, vslot, bslot) -> None:
    env, bufs = c.frame.env, c.frame.bufs
    bound = []
    for k, (p, a) in enumerate(zip(params, arrays)):
        if isinstance(p, Var):
            env[vslot[id(p)]] = scalar_value(k, p, a)
            bound.append((p, env[vslot[id(p)]]))

    def bind(var, value):
        env[vslot[id(var)]] = value

    binder = SizeBinder(lambda e: int(c.expr(e)()), bind, bound)
    for k, (p, a) in enumerate(zip(params, arrays)):
        if isinstance(p, Buffer):
            arr = buffer_array(k, p, a)
            bufs[bslot[k]] = arr
            for d, (expr, actual) in enumerate(zip(p.shape, arr.shape)):
                binder.dim(k, p.name, d, expr, actual)
    binder.finish()


__all__ = ["interpret"]
