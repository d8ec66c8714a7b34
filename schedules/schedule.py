"""The Schedule: the current PrimFunc, the trace, and one method per primitive.

The class is thin on purpose: each method documents its primitive and calls
``self._apply(name, ...)``, which looks the pure primitive function up in the registry
(:mod:`schedules.primitive`), applies it to ``sch.func``, and only when it succeeded
replaces ``sch.func`` and appends the instruction to ``sch.trace``.  A refused
primitive raises a :class:`ScheduleError` and leaves both unchanged.  With
``debug=True`` every step is also checked (verifier + reference interpreter, see
:mod:`schedules.debug`).

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((16,), name="A")
    >>> f = T.create_prim_func([A, T.compute((16,), lambda i: A[i] * 2.0, name="B")])
    >>> sch = S.Schedule(f)
    >>> (i,) = sch.get_loops(sch.get_block("B"))
    >>> io, ii = sch.split(i, [None, 4])
    >>> sch.vectorize(ii)
    >>> [l.var.name for l in sch.get_loops(sch.get_block("B"))]
    ['i_0', 'i_1']
    >>> len(sch.trace)
    6
"""

from __future__ import annotations

import random

from cuvil_tir.block_regions import verify_block_regions
from cuvil_tir.function import PrimFunc

from . import primitives as _primitives  # noqa: F401  (registers every primitive)
from .block_methods import BlockMethods
from .errors import (ScheduleArgumentError, TraceError, UnknownPrimitiveError,
                     schedule_error)
from .handles import BlockRV, LoopRV
from .primitive import PRIMITIVES
from .sampling import SAMPLERS, Sampled
from .trace import Instruction, Trace, encode, flatten


def _key(rv):
    if isinstance(rv, BlockRV):
        return ("block", rv.name)
    if isinstance(rv, LoopRV):
        return ("loop", id(rv.var))
    return ("value", id(rv))


class Schedule(BlockMethods):
    """Schedule ``func``; ``debug=True`` checks every step, ``seed`` fixes sampling.

    The block primitives (compute_at, cache_read, rfactor, ...) are methods inherited
    from :class:`schedules.block_methods.BlockMethods`.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> Schedule(f).func is f
        True
    """

    def __init__(self, func: PrimFunc, debug: bool = False, seed=None):
        if not isinstance(func, PrimFunc):
            raise schedule_error(ScheduleArgumentError, "Schedule", f"expected a PrimFunc "
                                 f"(e.g. from T.create_prim_func), got "
                                 f"{type(func).__name__}")
        # primitives trust declared regions: a block whose T.reads under-states its
        # body would be scheduled into wrong results
        verify_block_regions(func)
        self._func = func
        self._trace = Trace()
        self.debug = debug
        self.seed = seed
        self._rng = random.Random(seed)
        self._rvs: list = []          # every handle the trace produced (keeps ids alive)
        self._index: dict = {}        # _key(handle) -> trace index
        self._checker = None

    # state ------------------------------------------------------------------------------

    @property
    def func(self) -> PrimFunc:
        """The current PrimFunc (immutable; each primitive makes a new one)."""
        return self._func

    @property
    def trace(self) -> Trace:
        """The instructions applied so far."""
        return self._trace

    def copy(self) -> "Schedule":
        """An independent schedule at the same point (the immutable IR is shared).

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> other = sch.copy()
            >>> _ = other.split(other.get_loops(other.get_block("B"))[0], [2, 4])
            >>> len(sch.trace), len(other.trace)
            (0, 3)
        """
        new = Schedule.__new__(Schedule)
        new._func = self._func
        new._trace = self._trace
        new.debug = self.debug
        new.seed = self.seed
        new._rng = random.Random()
        new._rng.setstate(self._rng.getstate())
        new._rvs = list(self._rvs)
        new._index = dict(self._index)
        new._checker = self._checker
        return new

    def show(self) -> None:
        """Print the current function (its text form)."""
        print(self._func)

    def __repr__(self) -> str:
        return f"Schedule({self._func.name}, {len(self._trace)} instructions)"

    # the one path every primitive takes --------------------------------------------------

    def _apply(self, name: str, *args, **kwargs):
        return self._run(name, list(args), kwargs)

    def _run(self, name: str, args: list, kwargs: dict):
        sampler = SAMPLERS.get(name)
        fn = sampler or PRIMITIVES.get(name)
        if fn is None:
            raise schedule_error(UnknownPrimitiveError, name, "this primitive is not "
                                 "registered (its module is not imported by "
                                 "schedules/primitives/__init__.py); registered: "
                                 f"{', '.join(sorted(PRIMITIVES))}")
        self._check_own_loops(name, args)
        decision = kwargs.pop("decision", None) if sampler else None
        if sampler:
            rng_state = self._rng.getstate()
            result, decision = sampler(self._func, self._rng, *args, decision=decision,
                                       **kwargs)
            new_func = self._func
        else:
            new_func, result = fn(self._func, *args, **kwargs)
        try:
            # after the primitive, so that its legality message comes first
            inputs = encode(args, self._index_of, name)
            attrs = {k: encode(v, self._index_of, name) for k, v in kwargs.items()}
        except Exception:
            if sampler:
                self._rng.setstate(rng_state)
            raise
        if self.debug and new_func is not self._func:
            from .debug import check_step
            self._checker = check_step(name, self._func, new_func, self._checker)
        outputs = []
        for rv in flatten(result):
            if isinstance(rv, (BlockRV, LoopRV, Sampled)):
                outputs.append(self._register(rv))
        self._func = new_func
        self._trace = self._trace.append(Instruction(name, inputs, attrs, outputs, decision))
        return result

    def _check_own_loops(self, name, args):
        # before the primitive: resolving a foreign loop in this function would
        # misreport it as a loop a primitive replaced
        for rv in flatten(args):
            if isinstance(rv, LoopRV) and self._index_of(rv) is None:
                raise schedule_error(TraceError, name, f"{rv!r} was not produced by this "
                                     "schedule (it is a handle of another Schedule, or "
                                     "was built by hand); get loop handles from this "
                                     "schedule's get_loops or its primitives' results")

    def _index_of(self, rv):
        return self._index.get(_key(rv))

    def _register(self, rv) -> int:
        idx = len(self._rvs)
        self._rvs.append(rv)
        self._index[_key(rv)] = idx
        return idx

    # queries ----------------------------------------------------------------------------

    def get_block(self, name: str) -> BlockRV:
        """The handle of the block called ``name``.

        Example::

            >>> import cuvil_tir as T
            >>> Schedule(T.create_prim_func([T.placeholder((2,), name="A")])).get_block("root")
            BlockRV('root')
        """
        return self._apply("get_block", name)

    def get_loops(self, block: BlockRV) -> list:
        """The loops between ``block`` and its parent block, outer to inner.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((2, 3), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((2, 3), lambda i, j: A[i, j],
            ...                                                 name="B")]))
            >>> sch.get_loops(sch.get_block("B"))
            [LoopRV(i), LoopRV(j)]
        """
        return self._apply("get_loops", block)

    def get_child_blocks(self, block_or_loop) -> list:
        """The blocks directly under a block or a loop (not inside another block).

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((2,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((2,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> sch.get_child_blocks(sch.get_block("root"))
            [BlockRV('B')]
        """
        return self._apply("get_child_blocks", block_or_loop)

    def get_producers(self, block: BlockRV) -> list:
        """Sibling blocks writing a buffer that ``block`` reads.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((2,), name="A")
            >>> B = T.compute((2,), lambda i: A[i] + 1.0, name="B")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((2,), lambda i: B[i],
            ...                                                 name="C")]))
            >>> sch.get_producers(sch.get_block("C"))
            [BlockRV('B')]
        """
        return self._apply("get_producers", block)

    def get_consumers(self, block: BlockRV) -> list:
        """Sibling blocks reading a buffer that ``block`` writes.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((2,), name="A")
            >>> B = T.compute((2,), lambda i: A[i] + 1.0, name="B")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((2,), lambda i: B[i],
            ...                                                 name="C")]))
            >>> sch.get_consumers(sch.get_block("B"))
            [BlockRV('C')]
        """
        return self._apply("get_consumers", block)

    # loops ------------------------------------------------------------------------------

    def split(self, loop: LoopRV, factors) -> list:
        """Split ``loop`` into ``len(factors)`` nested loops ``i_0, i_1, ...``.

        One factor may be ``None`` (inferred: ``ceildiv(extent, others)``).  Factors
        multiplying to more than the extent add the guard ``T.where(... < extent)``;
        fewer would drop iterations and raise ``FactorError``.  Before/after::

            for i in T.serial(10):            for i_0, i_1 in T.grid(3, 4):
                with T.block("B"):                with T.block("B"):
                    vi = T.axis.spatial(10, i)        vi = T.axis.spatial(10, i_0 * 4 + i_1)
                    ...                               T.where(i_0 * 4 + i_1 < 10)

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((10,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((10,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
            [LoopRV(i_0), LoopRV(i_1)]
        """
        return self._apply("split", loop, list(factors) if isinstance(factors, tuple)
                           else factors)

    def fuse(self, *loops: LoopRV) -> LoopRV:
        """Fuse adjacent, perfectly nested loops (outer first) into ``i_j_fused``.

        Before/after::

            for i, j in T.grid(2, 3):         for i_j_fused in T.serial(6):
                vi, vj = i, j                     vi, vj = i_j_fused // 3, i_j_fused % 3

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((2, 3), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((2, 3), lambda i, j: A[i, j],
            ...                                                 name="B")]))
            >>> sch.fuse(*sch.get_loops(sch.get_block("B")))
            LoopRV(i_j_fused)
        """
        return self._apply("fuse", *loops)

    def reorder(self, *loops: LoopRV) -> None:
        """Put loops of one chain in the given order (outer first).

        Before/after ``reorder(j, i)``::

            for i, j in T.grid(2, 3): ...     for j, i in T.grid(3, 2): ...

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((2, 3), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((2, 3), lambda i, j: A[i, j],
            ...                                                 name="B")]))
            >>> i, j = sch.get_loops(sch.get_block("B"))
            >>> sch.reorder(j, i)
            >>> sch.get_loops(sch.get_block("B"))
            [LoopRV(j), LoopRV(i)]
        """
        return self._apply("reorder", *loops)

    def tile(self, loop_a: LoopRV, loop_b: LoopRV, factor_a, factor_b) -> list:
        """Split both loops by their inner factors and reorder to ``ao, bo, ai, bi``.

        Before/after ``tile(i, j, 2, 4)``::

            for i, j in T.grid(4, 8):         for i_0, j_0, i_1, j_1 in T.grid(2, 2, 2, 4):

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((4, 8), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((4, 8), lambda i, j: A[i, j],
            ...                                                 name="B")]))
            >>> sch.tile(*sch.get_loops(sch.get_block("B")), 2, 4)
            [LoopRV(i_0), LoopRV(j_0), LoopRV(i_1), LoopRV(j_1)]
        """
        return self._apply("tile", loop_a, loop_b, factor_a, factor_b)

    def parallel(self, loop: LoopRV) -> None:
        """Make ``loop`` parallel; refused on a loop carrying a reduction.

        Before/after: ``for i in T.serial(8)`` -> ``for i in T.parallel(8)``.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> sch.parallel(sch.get_loops(sch.get_block("B"))[0])
            >>> sch.func.body.block.body.kind
            'parallel'
        """
        return self._apply("parallel", loop)

    def vectorize(self, loop: LoopRV) -> None:
        """Vectorize ``loop`` (constant extent; refused on a reduction loop).

        Before/after: ``for i in T.serial(8)`` -> ``for i in T.vectorized(8)``.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> sch.vectorize(sch.get_loops(sch.get_block("B"))[0])
            >>> sch.func.body.block.body.kind
            'vectorized'
        """
        return self._apply("vectorize", loop)

    def unroll(self, loop: LoopRV) -> None:
        """Unroll ``loop``.

        Before/after: ``for i in T.serial(4)`` -> ``for i in T.unroll(4)``.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((4,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((4,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> sch.unroll(sch.get_loops(sch.get_block("B"))[0])
            >>> sch.func.body.block.body.kind
            'unrolled'
        """
        return self._apply("unroll", loop)

    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Bind ``loop`` to ``blockIdx.x/y/z``, ``threadIdx.x/y/z`` or ``vthread.*``.

        A reduction loop may be bound to ``threadIdx.*`` only (a cross-thread
        reduction, annotated ``cross_thread_reduction``).  Before/after::

            for i in T.serial(8):     ->     for i in T.thread_binding(8, thread="threadIdx.x"):

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> sch.bind(sch.get_loops(sch.get_block("B"))[0], "blockIdx.x")
            >>> sch.func.body.block.body.thread_tag
            'blockIdx.x'
        """
        return self._apply("bind", loop, thread_axis)

    def annotate(self, loop_or_block, key: str, value) -> None:
        """Set annotation ``key = value`` (bool/int/float/str or lists) on a loop/block.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> sch.annotate(sch.get_loops(sch.get_block("B"))[0], "pragma_unroll", 4)
            >>> sch.func.body.block.body.annotations
            (('pragma_unroll', 4),)
        """
        return self._apply("annotate", loop_or_block, key, value)

    def unannotate(self, loop_or_block, key: str) -> None:
        """Remove annotation ``key`` from a loop or a block.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> b = sch.get_block("B")
            >>> sch.annotate(b, "k", 1); sch.unannotate(b, "k")
            >>> sch.func.body.block.body.body.block.annotations
            ()
        """
        return self._apply("unannotate", loop_or_block, key)

    # sampling ---------------------------------------------------------------------------

    def sample_perfect_tile(self, loop: LoopRV, n: int, max_innermost_factor: int = 16,
                            decision=None) -> list:
        """``n`` ints multiplying to ``loop``'s extent, innermost at most
        ``max_innermost_factor``; recorded with its decision.  Feed them to ``split``.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((16,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((16,), lambda i: A[i],
            ...                                                 name="B")]), seed=0)
            >>> i = sch.get_loops(sch.get_block("B"))[0]
            >>> f = sch.sample_perfect_tile(i, 2, decision=[4, 4])
            >>> sch.split(i, f)
            [LoopRV(i_0), LoopRV(i_1)]
        """
        return self._apply("sample_perfect_tile", loop, n,
                           max_innermost_factor=max_innermost_factor, decision=decision)

    def sample_categorical(self, candidates, probs, decision=None):
        """One of ``candidates`` drawn with ``probs``; the decision is its index.

        Example::

            >>> import cuvil_tir as T
            >>> sch = Schedule(T.create_prim_func([T.placeholder((2,), name="A")]))
            >>> sch.sample_categorical([16, 32, 64], [0.2, 0.3, 0.5], decision=1)
            32
        """
        return self._apply("sample_categorical", list(candidates), list(probs),
                           decision=decision)
