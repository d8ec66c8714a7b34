"""Sampling primitives: random decisions recorded in the trace (the search space).

A sampler is ``fn(func, rng, *args, decision=None, **kw) -> (values, decision)``: with
``decision=None`` it draws one from ``rng`` (a ``random.Random``), otherwise it checks
and uses the one given (replay).  Sampled values are returned as :class:`SampledInt`
(or ``SampledFloat``/``SampledStr``): plain Python values that the trace recognises by
identity, so a ``split`` fed with them records *which sample* it used, and replaying
the trace with another decision changes the split too.

Example::

    >>> import random
    >>> import cuvil_tir as T
    >>> from schedules.handles import LoopRV
    >>> A = T.placeholder((16,), name="A")
    >>> f = T.create_prim_func([A, T.compute((16,), lambda i: A[i], name="B")])
    >>> i = LoopRV(f.body.block.body.loop_var)
    >>> values, decision = sample_perfect_tile(f, random.Random(0), i, 2, decision=[4, 4])
    >>> values, decision
    ([4, 4], [4, 4])
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from .analysis import const_int, loop_path
from .errors import ScheduleArgumentError, schedule_error
from .primitive import CANDIDATES, LOOP, POS_INT, PROBS, SAMPLED, SAMPLES, primitive


class Sampled:
    """Mixin marking a value produced by a sampling primitive (tracked by identity).

    Example::

        >>> isinstance(SampledInt(3), Sampled), int(SampledInt(3) + 1)
        (True, 4)
    """

    __slots__ = ()


_OPS = {"add": int.__add__, "sub": int.__sub__, "mul": int.__mul__,
        "floordiv": int.__floordiv__, "mod": int.__mod__}


def derive(op: str, a, b):
    """The int ``a <op> b`` that remembers it was computed from sampled values, so
    the trace records the arithmetic and replay recomputes it from new decisions.

    Example::

        >>> d = derive("floordiv", SampledInt(8), 2)
        >>> d, d.derivation
        (4, ('floordiv', 8, 2))
    """
    out = DerivedInt(_OPS[op](int(a), int(b)))
    out.derivation = (op, a, b)
    return out


def _arith(op: str, reflected: bool = False):
    def method(self, other):
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return derive(op, other, self) if reflected else derive(op, self, other)
    method.__name__ = f"__{'r' if reflected else ''}{op}__"
    return method


class SampledInt(Sampled, int):
    """An int drawn by a sampling primitive.  Arithmetic with ints (``+ - * // %``)
    gives a :class:`DerivedInt` that the trace records as the computation, not as a
    constant (replaying with other decisions recomputes it).

    Example::

        >>> SampledInt(8) * 2
        16
    """

    __slots__ = ()

    __add__, __radd__ = _arith("add"), _arith("add", True)
    __sub__, __rsub__ = _arith("sub"), _arith("sub", True)
    __mul__, __rmul__ = _arith("mul"), _arith("mul", True)
    __floordiv__, __rfloordiv__ = _arith("floordiv"), _arith("floordiv", True)
    __mod__, __rmod__ = _arith("mod"), _arith("mod", True)


class DerivedInt(SampledInt):
    """An int computed from sampled values; ``derivation`` is ``(op, a, b)``.

    Example::

        >>> (SampledInt(3) + 1).derivation[0]
        'add'
    """

    # int subclasses cannot have non-empty __slots__: ``derivation`` lives in __dict__


class SampledFloat(Sampled, float):
    """A float drawn by a sampling primitive.

    Example::

        >>> SampledFloat(0.5) + 1
        1.5
    """

    __slots__ = ()


class SampledStr(Sampled, str):
    """A str drawn by a sampling primitive.

    Example::

        >>> SampledStr("a") + "b"
        'ab'
    """

    __slots__ = ()


def wrap(value):
    """``value`` as a tracked sampled value (bools and other types are returned as is).

    Example::

        >>> type(wrap(3)).__name__, type(wrap("x")).__name__
        ('SampledInt', 'SampledStr')
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return SampledInt(value)
    if isinstance(value, float):
        return SampledFloat(value)
    if isinstance(value, str):
        return SampledStr(value)
    return value


def _divisors(n: int) -> list:
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def perfect_tiles(extent: int, n: int, max_innermost_factor: int) -> list:
    """All ordered ``n``-tuples of positive ints multiplying to ``extent`` whose last
    element is at most ``max_innermost_factor``.

    Example::

        >>> perfect_tiles(4, 2, 16)
        [[1, 4], [2, 2], [4, 1]]
        >>> perfect_tiles(8, 2, 2)
        [[4, 2], [8, 1]]
    """
    out: list = []

    def rec(rest, k, prefix):
        if k == 1:
            if rest <= max_innermost_factor or n == 1:
                out.append(prefix + [rest])
            return
        for d in _divisors(rest):
            rec(rest // d, k - 1, prefix + [d])

    rec(extent, n, [])
    return out


def symbolic_tiles(n: int, max_innermost_factor: int) -> list:
    """The tilings of a loop of symbolic extent: ``-1`` (inferred by ``split``, as in
    TensorIR) then ``n - 1`` powers of two, each at most ``max_innermost_factor``.

    Example::

        >>> symbolic_tiles(2, 4)
        [[-1, 1], [-1, 2], [-1, 4]]
    """
    powers = [1 << k for k in range(max_innermost_factor.bit_length())
              if 1 << k <= max_innermost_factor]
    out = [[-1]]
    for _ in range(n - 1):
        out = [t + [p] for t in out for p in powers]
    return out


def _mutate_tile(inst, rng):
    """Another tiling of the same extent (the product of the recorded decision), or of
    a symbolic extent when the decision starts with -1."""
    n = inst.inputs[1] if len(inst.inputs) > 1 else inst.attrs["n"]
    most = inst.attrs.get("max_innermost_factor", 16)
    if inst.decision and inst.decision[0] == -1:
        return rng.choice(symbolic_tiles(n, most))
    extent = 1
    for d in inst.decision:
        extent *= d
    return rng.choice(perfect_tiles(extent, n, most))


def _mutate_categorical(inst, rng):
    """Another candidate index with a positive probability."""
    probs = inst.inputs[1] if len(inst.inputs) > 1 else inst.attrs["probs"]
    return rng.choice([i for i, p in enumerate(probs) if p > 0])


@primitive("sample_perfect_tile", loop=LOOP, n=POS_INT, max_innermost_factor=POS_INT,
           returns=SAMPLES, sampler=True, mutate=_mutate_tile)
def sample_perfect_tile(func, rng, loop, n, max_innermost_factor=16, decision=None):
    """``n`` ints multiplying to ``loop``'s constant extent, innermost at most
    ``max_innermost_factor``, drawn uniformly from all such tilings and recorded with
    their decision.  Feed them to ``split``.

    A loop of symbolic extent gets ``-1`` (inferred by ``split``, as in TensorIR) then
    ``n - 1`` powers of two up to ``max_innermost_factor`` (:func:`symbolic_tiles`);
    the split guards the last tile.  ``sch.sample_perfect_tile(i, 2, decision=[-1, 8])``
    on ``for i in T.serial(n)`` gives ``[-1, 8]``, and ``split`` then makes
    ``T.serial((n + 7) // 8)`` and ``T.serial(8)``.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((16,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((16,), lambda i: A[i],
        ...                                                   name="B")]), seed=0)
        >>> i = sch.get_loops("B")[0]
        >>> f = sch.sample_perfect_tile(i, 2, decision=[4, 4])
        >>> sch.split(i, f)
        [LoopRV(i_0), LoopRV(i_1)]
    """
    name = "sample_perfect_tile"
    node = tree.get(func, loop_path(func, loop, name))
    extent = const_int(node.extent)
    if extent is None:
        return _symbolic_tile(func, rng, node, n, max_innermost_factor, decision)
    if decision is None:
        decision = rng.choice(perfect_tiles(extent, n, max_innermost_factor))
    else:
        decision = list(decision)
        prod = 1
        for d in decision:
            if isinstance(d, bool) or not isinstance(d, int) or d < 1:
                raise schedule_error(ScheduleArgumentError, name, f"decision {decision!r}: "
                                     f"expected positive ints, got {d!r}")
            prod *= d
        if len(decision) != n or prod != extent:
            raise schedule_error(ScheduleArgumentError, name, f"decision {decision!r}: "
                                 f"expected {n} factors multiplying to the extent "
                                 f"{extent} of loop {node.loop_var.name}")
    decision = [int(d) for d in decision]
    return [SampledInt(d) for d in decision], decision


def _symbolic_tile(func, rng, node, n, max_innermost_factor, decision):
    name = "sample_perfect_tile"
    if decision is None:
        decision = rng.choice(symbolic_tiles(n, max_innermost_factor))
    decision = list(decision)
    ok = len(decision) == n and decision[0] == -1 and all(
        not isinstance(d, bool) and isinstance(d, int) and d >= 1 for d in decision[1:])
    if not ok:
        raise schedule_error(ScheduleArgumentError, name, f"decision {decision!r}: loop "
                             f"{node.loop_var.name} has the symbolic extent {node.extent}, "
                             f"so expected {n} ints: -1 (the outer factor, inferred) then "
                             f"{n - 1} positive factors", func, node)
    decision = [int(d) for d in decision]
    return [SampledInt(d) for d in decision], decision


@primitive("sample_categorical", candidates=CANDIDATES, probs=PROBS, returns=SAMPLED,
           sampler=True, mutate=_mutate_categorical)
def sample_categorical(func, rng, candidates, probs, decision=None):
    """One of ``candidates`` drawn with probabilities ``probs``; the decision, recorded
    in the trace, is its index.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> sch = S.Schedule(T.create_prim_func([T.placeholder((2,), name="A")]))
        >>> sch.sample_categorical([16, 32, 64], [0.2, 0.3, 0.5], decision=1)
        32
    """
    name = "sample_categorical"
    if len(candidates) != len(probs):
        raise schedule_error(ScheduleArgumentError, name, f"expected as many probabilities "
                             f"as candidates, got {len(candidates)} candidates and "
                             f"{len(probs)} probabilities")
    if decision is None:
        decision = rng.choices(range(len(candidates)), weights=probs)[0]
    elif isinstance(decision, bool) or not isinstance(decision, int) or \
            not 0 <= decision < len(candidates):
        raise schedule_error(ScheduleArgumentError, name, f"decision {decision!r}: expected "
                             f"an index in [0, {len(candidates)})")
    return wrap(candidates[decision]), int(decision)


SAMPLERS = {
    "sample_perfect_tile": sample_perfect_tile,
    "sample_categorical": sample_categorical,
}
"""Sampling primitives by trace name."""
