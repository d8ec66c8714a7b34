"""One ``ScheduleError`` subclass per legality failure, and the message builder.

Every refused primitive raises a subclass of :class:`cuvil_tir.errors.ScheduleError`
whose message reads ``"<primitive>: <reason>"`` followed by the IR with the offending
loop or block marked (when the printer supports highlighting), so the user sees what
was refused and where.  The error keeps ``primitive``, ``reason`` and ``node``.

Example::

    >>> err = schedule_error(FactorError, "split", "factor 2 of [-4]: expected a "
    ...                      "positive int, got -4")
    >>> str(err)
    '[CVL-E103] split: factor 2 of [-4]: expected a positive int, got -4'
    >>> isinstance(err, ScheduleError)
    True
"""

from __future__ import annotations

from cuvil_tir.errors import (ScheduleArgumentError, ScheduleError,  # noqa: F401 - re-exported
                              UnknownTensorIntrinError, render_ir, schedule_error)


class BlockNotFoundError(ScheduleArgumentError):
    """Cannot find a block with the specified name in the function.

    Example::

        >>> issubclass(BlockNotFoundError, ScheduleArgumentError)
        True
    """


class FactorError(ScheduleArgumentError):
    """``split``/``tile`` factors are not positive ints, or disagree with the extent.

    Example::

        >>> issubclass(FactorError, ScheduleArgumentError)
        True
    """


class WorkOnError(ScheduleArgumentError, ValueError):
    """A schedule of a module does not know which function is meant: none was chosen
    with ``work_on``, the name is not one of the module's, or one primitive was given
    handles of two functions.  A ``ValueError`` too, as TVM raises.

    Example::

        >>> issubclass(WorkOnError, ValueError)
        True
    """


class LoopNestError(ScheduleError):
    """Loops are not adjacent / perfectly nested / in a single chain as required.

    Example::

        >>> LoopNestError("fuse: loops are not adjacent").code
        'CVL-E103'
    """


class ReductionLoopError(ScheduleError):
    """A loop carries a reduction, which the primitive cannot parallelise.

    Example::

        >>> ReductionLoopError("parallel: loop k carries the reduction of block C").code
        'CVL-E103'
    """


class LoopCarriedError(ReductionLoopError):
    """Iterations of the loop touch the same memory (``B[i] = B[i - 1] + A[i]``), so
    they cannot run in parallel or as vector lanes.

    Example::

        >>> LoopCarriedError("parallel: loop i carries a dependence").code
        'CVL-E103'
    """


class NonConstantExtentError(ScheduleError):
    """The primitive needs a loop whose extent is a constant.

    Example::

        >>> NonConstantExtentError("vectorize: extent n is not constant").code
        'CVL-E103'
    """


class AnnotationError(ScheduleError):
    """An annotation key is missing or its value cannot be recorded.

    Example::

        >>> AnnotationError("unannotate: no annotation 'x'").code
        'CVL-E103'
    """


class UnknownPrimitiveError(ScheduleError):
    """The primitive named is not registered (its module was not imported).

    Example::

        >>> UnknownPrimitiveError("rfactor: not registered").code
        'CVL-E103'
    """


class DebugCheckError(ScheduleError):
    """Debug mode found that a primitive produced ill-formed or different-valued IR.

    Example::

        >>> DebugCheckError("split: results differ").code
        'CVL-E103'
    """


class TraceError(ScheduleError):
    """A trace could not be recorded, serialised or replayed.

    Example::

        >>> TraceError("replay: instruction 3 refers to unknown value 7").code
        'CVL-E103'
    """


class ForeignHandleError(TraceError, IndexError):
    """A loop handle (or sampled value) this schedule did not produce: from another
    Schedule (a copy that went its own way), or built by hand.  Handles index the
    schedule's table of values, hence also an ``IndexError``.

    Example::

        >>> issubclass(ForeignHandleError, IndexError)
        True
    """


RENDER_LEVELS = ("detail", "fast", "none")
"""How much a schedule's errors say: ``detail`` the reason and the IR (rendered when
first read), ``fast`` the error kind's one-line summary, ``none`` nothing."""


def summary(cls) -> str:
    """The one-line summary of an error class: the first line of its docstring.

    Example::

        >>> summary(BlockNotFoundError)
        'Cannot find a block with the specified name in the function.'
    """
    doc = (cls.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else cls.__name__


def condense(err, level: str, primitive: str):
    """``err`` with its message cut to ``level`` (one of :data:`RENDER_LEVELS`):
    ``fast`` keeps only the class's summary (no names, no IR: every refusal of one
    kind reads the same), ``none`` says ``(not rendered)``.  Class, code and
    ``primitive`` stay.

    Example::

        >>> e = schedule_error(FactorError, "split", "factor 2 of [2, -4] is -4")
        >>> str(condense(e, "fast", "split"))
        '[CVL-E103] split: ``split``/``tile`` factors are not positive ints, or disagree with the extent.'
        >>> str(condense(e, "none", "split"))
        '[CVL-E103] split: (not rendered)'
    """
    if level == "detail":
        return err
    primitive = getattr(err, "primitive", None) or primitive
    err._render = None
    text = summary(type(err)) if level == "fast" else "(not rendered)"
    err.message = f"{primitive}: {text}"
    err.args = (err.message,)
    return err


class BlockLocationError(ScheduleError):
    """``compute_at``/``reverse_compute_at`` cannot move the block under that loop.

    Example::

        >>> BlockLocationError("compute_at: loop i is the block's own loop").code
        'CVL-E103'
    """


class InlineError(ScheduleError):
    """``compute_inline``/``reverse_compute_inline`` cannot inline the block.

    Example::

        >>> InlineError("compute_inline: block C is a reduction block").code
        'CVL-E103'
    """


class CacheStageError(ScheduleError):
    """``cache_read``/``cache_write`` cannot stage the buffer.

    Example::

        >>> CacheStageError("cache_read: read_buffer_index 3 out of range").code
        'CVL-E103'
    """


class StorageError(ScheduleError):
    """``set_scope``/``storage_align`` cannot change the buffer's storage.

    Example::

        >>> StorageError("set_scope: buffer C is a function parameter").code
        'CVL-E103'
    """


class StagePipelineError(ScheduleError):
    """The block's scope is not a stage pipeline (a read its producers do not cover, or
    a write after a read), which the primitive needs (TensorIR's ``rfactor``).

    Example::

        >>> StagePipelineError("rfactor: the scope 'root' is not a stage pipeline").code
        'CVL-E103'
    """


class RegionContractError(ScheduleError):
    """A primitive's result has a block accessing outside the regions it or a block
    around it declares (its printed text would not parse back); the step is refused.

    Example::

        >>> RegionContractError("cache_read: block 'P' reads X[0:4] outside X[0:2]").code
        'CVL-E103'
    """


fail = schedule_error
"""The same builder under the short name the block primitives use."""


class LayoutError(ScheduleError):
    """A buffer's layout cannot be transformed (a parameter, or a bad index map).

    Example::

        >>> LayoutError("transform_layout: A is a parameter").code
        'CVL-E103'
    """


class NotReductionError(ScheduleError):
    """The block is not a reduction block (no init, or no recognised combiner).

    Example::

        >>> NotReductionError("rfactor: block B is not a reduction").code
        'CVL-E103'
    """


__all__ = ["LayoutError", "NotReductionError", "ScheduleError", "ScheduleArgumentError", "BlockNotFoundError", "FactorError", "LoopNestError",
           "ReductionLoopError", "LoopCarriedError", "NonConstantExtentError", "AnnotationError",
           "UnknownPrimitiveError", "DebugCheckError", "TraceError", "ForeignHandleError",
           "render_ir",
           "schedule_error", "BlockLocationError", "InlineError", "CacheStageError",
           "StorageError", "StagePipelineError", "UnknownTensorIntrinError", "fail", "RENDER_LEVELS", "summary",
           "condense"]
