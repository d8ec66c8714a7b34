"""Which space the tuner searches for a target: chosen from what the target kind
declares through the backend contract (:mod:`cuvil_tir.target`), never from its name.

1. The kind's own ``tuning_space(func, target)`` when it gives one (an accelerator's
   tiling over its memories, scored by simulated cycles);
2. thread axes (an axis of level ``thread`` among the kind's ``axes``) and a
   ``shared`` memory: the GPU rules of :mod:`.gpu_rules`
   (MetaSchedule's multi-level tiling shape: grid, virtual-thread and thread levels
   bound to the axes the kind declares, per-thread register tiles accumulated in
   ``local`` memory, operands fetched cooperatively into ``shared`` memory at the
   outer reduction loop in 1 to 3 pipeline stages, or warp tiles of a registered
   tensor-core intrinsic, :mod:`.gpu_tensorcore`);
3. memories of its own (beyond the host's) that a registered tensor intrinsic takes
   its operands from, and a reduction block that intrinsic computes: the staged rule
   of :mod:`.staged` (tiles staged into those memories, sized to fit them, buffering
   depth 1 or 2 when the kind declares a ``buffering`` annotation), measured by the
   kind (an accelerator's simulated cycles);
4. a machine (``machine(target)``: vector lanes, registers, caches, cores): the CPU
   rules of :func:`.space.generated_space`, with every registered tensor intrinsic
   that a reduction block computes and the target builds offered beside the register
   tile (:mod:`.autotensorize`), for a GEMM of int8 or bfloat16 operands on a
   target with the x86 dot-product instructions, B packed for them (:mod:`.dot_rule`),
   for a GEMV-like block the reduction swept outside its columns
   (:mod:`.stream_rule`), and for a convolution whose weights exceed L2 and whose
   output plane fits a register tile's width, a GEMM over its positions
   (:mod:`.im2col_rule`);
5. otherwise a :class:`.errors.TuneError` that says what the kind would need to
   declare.

A function with symbolic sizes is refused first: a space is sized for concrete
extents.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((64,), name="A")
    >>> f = T.create_prim_func([A, T.compute((64,), lambda i: A[i] * 2.0, name="B")])
    >>> callable(space_for(f, "llvm")), rule_for("cuda")
    (True, 'gpu')
"""

from __future__ import annotations

from cuvil_tir.target import SCALAR_MACHINE, as_target, TargetKind

from .autotensorize import matches
from .dot_rule import dot_choices
from .errors import TuneError
from .gpu_rules import THREADS, gpu_prune, gpu_space
from .im2col_rule import im2col_choices
from .space import generated_space, reductions_of
from .staged import staged_match, staged_space
from .stream_rule import stream_choices

def _axes(kind) -> list:
    """``(tag, level, limit)`` of every parallel axis the kind declares (its ``axes``:
    :class:`~cuvil_tir.thread_axes.ThreadAxis` declarations)."""
    return [(a.tag, a.level, a.limit) for a in kind.axes]


def rule_for(target) -> str:
    """Which rule family the target's declarations select: ``"kind"`` (its own
    ``tuning_space``), ``"gpu"``, ``"cpu"``, or ``"none"``.

    Example::

        >>> rule_for("llvm"), rule_for("c")
        ('cpu', 'cpu')
    """
    t = as_target(target)
    kind = t.kind_obj
    if type(kind).tuning_space is not _base_tuning_space():
        return "kind"
    levels = {level for _, level, _ in _axes(kind)}
    scopes = {m.scope for m in kind.memories}
    if "thread" in levels and "shared" in scopes:
        return "gpu"
    if kind.machine(t) != SCALAR_MACHINE:
        return "cpu"
    return "none"


def _base_tuning_space():
    return TargetKind.tuning_space


def check_sizes(func) -> None:
    """Refuse a function whose parameters have symbolic sizes (a :class:`TuneError`
    naming the first).

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> check_sizes(T.create_prim_func([T.placeholder((n,), name="A")]))
        Traceback (most recent call last):
        ...
        schedules.tune.errors.TuneError: [CVL-E198] tune: parameter 'A' has the symbolic shape (n,): a space is sized for concrete extents; create the function with constant sizes (one per shape you want tuned)
    """
    for p in func.params:
        shape = getattr(p, "shape", ())
        if not all(isinstance(getattr(s, "value", None), int) for s in shape):
            dims = ", ".join(str(s) for s in shape)
            raise TuneError(f"tune: parameter {p.name!r} has the symbolic shape "
                            f"({dims}{',' if len(shape) == 1 else ''}): a space is sized "
                            "for concrete extents; create the function with constant "
                            "sizes (one per shape you want tuned)")


def space_for(func, target):
    """The space the tuner searches for ``func`` on ``target`` (module doc)."""
    check_sizes(func)
    t = as_target(target)
    kind = t.kind_obj
    rule = rule_for(t)
    if rule == "kind":
        own = kind.tuning_space(func, t)
        if own is not None:
            return own
        rule = "gpu" if "thread" in {lv for _, lv, _ in _axes(kind)} else \
            "cpu" if kind.machine(t) != SCALAR_MACHINE else "none"
    if rule == "gpu":
        return gpu_space(func, t)
    staged = staged_match(func, t)
    if staged is not None:
        return staged_space(func, t, *staged)
    if rule == "cpu":
        blocks = reductions_of(func)
        return generated_space(func, kind.machine(t),
                               {name: matches(func, name, t) for name in blocks},
                               {name: dot_choices(func, name, t) +
                                stream_choices(func, name, kind.machine(t)) +
                                im2col_choices(func, name, kind.machine(t)) for name in blocks})
    raise TuneError(
        f"tune: target kind {kind.name!r} declares nothing a space can be generated "
        "from: no tuning_space(func, target), no thread axes with a 'shared' memory, "
        "and machine(target) is the scalar default (no vector lanes, registers or "
        "caches), and no memories of its own that a registered tensor intrinsic of "
        "one of the function's reduction blocks takes its operands from.  Pass "
        "space=your_schedule_function, or declare one of these in the kind")


__all__ = ["THREADS", "check_sizes", "gpu_prune", "gpu_space", "rule_for", "space_for"]
