"""``lower``: a function (or a schedule's) through its target kind's passes.

``T.lower(f, target)`` and the build driver run exactly the same passes: the kind's
``pipeline(target)``, under a ``PassContext`` that carries the target, so a pass reads
vector width, features and memories from the target, never from the host.  A target
given by name (``"llvm -mcpu=haswell"``) is found in the one registry (loading its
entry point when needed); ``target=None`` lowers with the default, target-blind
pipeline.

Example::

    >>> import cuvil_tir as T
    >>> [pass_name(p) for p in get_pipeline(None)]
    ['lower_blocks', 'flatten_buffers', 'simplify', 'verify']
"""

from __future__ import annotations

from ..deep import deep_ok
from ..errors import LoweringError
from ..function import PrimFunc
from ..ir_module import IRModule, as_module
from ..transform.pass_manager import PassContext, PassManager, pass_name  # noqa: F401
from ..transform.pipeline import default_pipeline
from .target import as_target


def get_pipeline(target=None) -> list:
    """The pass list for ``target``: ``None`` -> the default pipeline; a ``Target`` or
    its string form -> its kind's ``pipeline(target)``.

    Example::

        >>> [pass_name(p) for p in get_pipeline("llvm")][-1]
        'verify'
    """
    if target is None:
        return default_pipeline()
    target = as_target(target)
    passes = target.kind_obj.pipeline(target)
    if isinstance(passes, (str, bytes)) or not isinstance(passes, (list, tuple)):
        raise LoweringError(f"pipeline of target kind {target.kind!r}: expected a list of "
                            f"passes, found {type(passes).__name__}")
    for p in passes:
        if not callable(p):
            raise LoweringError(f"pipeline of target kind {target.kind!r}: pass {p!r} is "
                                "not callable (a pass is PrimFunc -> PrimFunc)")
    return list(passes)


def as_func(func_or_sch, who: str = "lower", error=LoweringError):
    """``func_or_sch`` as a PrimFunc or IRModule (a Schedule gives its current
    function); anything else is ``error`` (a ``LoweringError`` by default).

    Example::

        >>> as_func(3)
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.LoweringError: [CVL-E104] lower: expected a PrimFunc, an IRModule or a Schedule (an object with .func), found int
    """
    if isinstance(func_or_sch, (PrimFunc, IRModule)):
        return func_or_sch
    func = getattr(func_or_sch, "func", None)     # a Schedule (schedules is above us)
    if isinstance(func, PrimFunc):
        return func
    raise error(f"{who}: expected a PrimFunc, an IRModule or a Schedule (an object "
                        f"with .func), found {type(func_or_sch).__name__}")


@deep_ok
def lower(func_or_sch, target=None) -> IRModule:
    """The module of ``func_or_sch`` after ``target``'s lowering passes (see
    :func:`get_pipeline`): its host entry, plus the functions the passes outlined
    (``parallel_task`` functions for ``llvm``).  Accepts a PrimFunc, an IRModule or a
    Schedule; ``lower(f)["main"]`` or ``.entry`` is the host function.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((2, 2), name="A")
        >>> mod = T.lower(T.create_prim_func([A, T.compute((2, 2), lambda i, j: A[i, j] * 2.0, name="B")]))
        >>> print(mod.entry)
        @T.prim_func
        def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
            T.func_attr({"calling_conv": "host", "global_symbol": "main"})
            for i in T.serial(2):
                for j in T.serial(2):
                    B[i * 2 + j] = A[i * 2 + j] * T.float32(2)
    """
    func = as_func(func_or_sch)
    target = None if target is None else as_target(target)
    passes = get_pipeline(target)
    # target None: a target-blind lowering inside PassContext(target=...) keeps that one
    with PassContext(target=target):
        return PassManager(passes).run(as_module(func))


__all__ = ["as_func", "get_pipeline", "lower"]
