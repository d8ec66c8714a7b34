"""``serial_threads``: what a scheduled GPU function means, as a serial function.

A TensorIR function whose loops are bound to ``blockIdx``/``threadIdx``/``vthread``
means what it means with those loops run one iteration after the other (binding
chooses *where* iterations run, not *what* they compute; the GPU lowering adds the
barriers that make the parallel run agree).  ``serial_threads`` makes every
thread-bound loop a serial loop and every buffer a ``global`` one: the reference that
``Schedule(debug=True)`` and the GPU-suite benchmark compare a schedule's steps and
builds with.  A software pipeline's annotations (``software_pipeline_stage`` ...) are
dropped: they say how a GPU overlaps iterations, not what the loop computes.  A warp-wide tile op left in it (a tensorized tensor-core step) is
computed once where it stands (:mod:`cuvil_tir.interp.tile_ops`).

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... def f(A: T.Buffer((4,), "float32")):
    ...     for i in T.thread_binding(4, thread="threadIdx.x"):
    ...         A[i] = T.float32(1)
    ... ''')
    >>> print(serial_threads(f).body)
    for i in T.serial(4):
        A[i] = T.float32(1)
"""

from __future__ import annotations

from ..function import PrimFunc
from ..stmt import For
from ..visitor import Mutator, post_order_visit
from .gpu_emulate import in_global_memory


def _meaning(annotations) -> tuple:
    # a software pipeline says how a GPU overlaps the loop's iterations, not what they
    # compute; run serially, over buffers in global memory, it has nothing to overlap
    return tuple((k, v) for k, v in annotations if not k.startswith("software_pipeline"))


class _Serial(Mutator):
    def visit_For(self, loop):
        body = self.visit(loop.body)
        ann = _meaning(loop.annotations)
        if loop.kind != "thread_binding":
            return loop if body is loop.body and len(ann) == len(loop.annotations) else \
                For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_tag,
                    ann)
        return For(loop.loop_var, loop.min, loop.extent, "serial", body, None, ann)


def has_thread_loops(func: PrimFunc) -> bool:
    """Whether a loop of ``func`` is bound to a thread axis.

    Example::

        >>> import cuvil_tir as T
        >>> has_thread_loops(T.PrimFunc([], T.Evaluate(T.const(0))))
        False
    """
    hit = []
    post_order_visit(func.body, lambda n: hit.append(1) if isinstance(n, For)
                     and n.kind == "thread_binding" else None)
    return bool(hit)


def serial_threads(func: PrimFunc) -> PrimFunc:
    """``func`` with its thread-bound loops serial and its buffers in ``global``
    memory (module docstring)."""
    body = _Serial().visit(func.body)
    return func.with_body(in_global_memory(body))


__all__ = ["has_thread_loops", "serial_threads"]
