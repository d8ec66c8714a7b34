"""The registry of schedule primitives and their metadata.

A primitive is a pure function ``fn(func, *args, **kwargs) -> (new_func, result)``: it
checks legality first and raises :class:`ScheduleError` (leaving nothing changed, since
nothing was mutated), then builds the new function.  ``@primitive(name, **kinds)``
registers it with the *kind* of each argument (a block, a loop, a list of factors ...)
and of its result.  From that one description:

- every call is checked argument by argument before the body runs, with messages such
  as ``argument 2, 'factors' to split: expected ..., found ...``, and a block argument
  also accepts the block's name;
- ``Schedule`` gets one method per primitive carrying the primitive's docstring (one
  docstring per primitive), see :func:`install_methods`;
- the trace names the primitive's results (``b3`` blocks, ``l4`` loops, ``v5`` sampled
  values) and a sampling primitive's ``mutate`` redraws its decision for the tuner.

Example::

    >>> @primitive("noop_example", block=BLOCK)
    ... def noop_example(func, block):
    ...     return func, block
    >>> PRIMITIVES["noop_example"] is noop_example
    True
    >>> noop_example(None, "C")[1]
    BlockRV('C')
    >>> noop_example(None, 3)
    Traceback (most recent call last):
    ...
    cuvil_tir.errors.ScheduleArgumentError: [CVL-E103] argument 1, 'block' to noop_example: expected a block handle (from sch.get_block) or a block name, found 3 (int)
    >>> del PRIMITIVES["noop_example"]
"""

from __future__ import annotations

import functools
import inspect

from cuvil_tir.target import declared_scopes
from cuvil_tir.expr import IntImm

from .errors import FactorError, ScheduleArgumentError, schedule_error
from .handles import BlockRV, LoopRV

PRIMITIVES: dict = {}
"""Primitive functions by name (each has ``.spec``, a :class:`Spec`)."""


class Mismatch(Exception):
    """Raised by a kind's converter: the value is not of the kind (message: why)."""


class Kind:
    """An argument or result kind: a name, what it expects (for messages), and a
    converter that returns the (normalised) value or raises :class:`Mismatch`.

    Example::

        >>> POS_INT.convert(3), POS_INT.expected
        (3, 'a positive int')
    """

    def __init__(self, name: str, expected: str, convert=None, prefix: str = "v",
                 error=None, many: bool = False):
        self.name = name
        self.expected = expected
        self.convert = convert or (lambda v: v)
        self.prefix = prefix      # how the trace names a result of this kind
        self.error = error        # the error class, when not the primitive's
        self.many = many          # a result kind: a list (printed unpacked), not one value

    def __repr__(self):
        return f"Kind({self.name})"


def _is_int(v) -> bool:
    return isinstance(v, IntImm) or (isinstance(v, int) and not isinstance(v, bool))


def _int(v) -> int:
    return v.value if isinstance(v, IntImm) else v


def _block(v):
    if isinstance(v, BlockRV):
        if v.name is None:
            raise Mismatch("a fresh handle, which only a hand-built Trace binds")
        return v
    if isinstance(v, str) and v:
        return BlockRV(v)
    raise Mismatch()


def _loop(v):
    if isinstance(v, LoopRV):
        return v
    if isinstance(v, BlockRV) or isinstance(v, str):
        raise Mismatch("a block; pass one of sch.get_loops(block)")
    raise Mismatch()


def _block_or_loop(v):
    if isinstance(v, LoopRV):
        return v
    return _block(v)


def _checked_int(pred):
    def convert(v):
        if not _is_int(v) or not pred(_int(v)):
            raise Mismatch()
        return v if isinstance(v, int) else _int(v)
    return convert


def _factors(v):
    if not isinstance(v, (list, tuple)) or len(v) < 2:
        raise Mismatch()
    inferred = [f is None or (_is_int(f) and _int(f) == -1) for f in v]   # -1: TensorIR's
    for k, f in enumerate(v):
        if not inferred[k] and (not _is_int(f) or _int(f) <= 0):
            raise Mismatch(f"element {k} is {f!r}")
    if sum(inferred) > 1:
        raise Mismatch("more than one None")
    return list(v)


def _int_list(v):
    if not isinstance(v, (list, tuple)) or not all(_is_int(x) for x in v):
        raise Mismatch()
    return list(v)


def _str(v):
    if not isinstance(v, str) or not v:
        raise Mismatch()
    return v


def _scope(v):
    if not isinstance(v, str) or not v or not all(c.isalnum() or c in "._" for c in v):
        raise Mismatch()
    if "." not in v:
        # a plain scope names a memory of a target kind: one no target has can never be
        # built (a typo such as "locla"); dotted accelerator scopes are checked at build
        known = [s for s in declared_scopes() if "." not in s]
        if v not in known:       # not among the kinds loaded: ask every installed one
            known = [s for s in declared_scopes(load=True) if "." not in s]
        if v not in known:
            raise Mismatch(f"no registered target has a memory {v!r} (their plain scopes: "
                           f"{', '.join(known)}); use one of them, register a target kind "
                           "whose memories include it, or name an accelerator memory "
                           "('npu.wgt')")
    return v


def _index_map(v):
    if not callable(v) or isinstance(v, type):
        raise Mismatch()
    return v


def _value(v):
    ok = (bool, int, float, str)
    if isinstance(v, ok) or (isinstance(v, (list, tuple)) and all(isinstance(x, ok)
                                                                   for x in v)):
        return v
    raise Mismatch()


def _bool(v):
    if not isinstance(v, bool):
        raise Mismatch()
    return v


def _candidates(v):
    if not isinstance(v, (list, tuple)) or not v or any(
            isinstance(c, bool) or not isinstance(c, (int, float, str)) for c in v):
        raise Mismatch()
    return list(v)


def _probs(v):
    if not isinstance(v, (list, tuple)) or any(
            isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0 for p in v) \
            or sum(v) <= 0:
        raise Mismatch()
    return list(v)


ANY = Kind("any", "any value")
BLOCK = Kind("block", "a block handle (from sch.get_block) or a block name", _block, "b",
             ScheduleArgumentError)
LOOP = Kind("loop", "a loop handle (from sch.get_loops)", _loop, "l", ScheduleArgumentError)
BLOCK_OR_LOOP = Kind("block_or_loop", "a loop handle (from sch.get_loops), a block "
                     "handle (from sch.get_block) or a block name", _block_or_loop,
                     error=ScheduleArgumentError)
INT = Kind("int", "an int", _checked_int(lambda n: True))
POS_INT = Kind("pos_int", "a positive int", _checked_int(lambda n: n > 0))
INDEX = Kind("index", "a non-negative int", _checked_int(lambda n: n >= 0))
FACTORS = Kind("factors", "a list of at least 2 positive ints, one of which may be "
               "None", _factors, error=FactorError)
INT_LIST = Kind("int_list", "a list of ints", _int_list)
STR = Kind("str", "a non-empty str", _str)
SCOPE = Kind("scope", "a storage scope name such as 'global', 'local', 'shared' or "
             "'npu.wgt'", _scope)
INDEX_MAP = Kind("index_map", "a function (lambda) from the buffer's indices to new "
                 "indices", _index_map)
VALUE = Kind("value", "a bool, int, float or str, or a list of them", _value)
BOOL = Kind("bool", "True or False", _bool)
CANDIDATES = Kind("candidates", "a non-empty list of ints, floats or strs", _candidates)
PROBS = Kind("probs", "a list of non-negative numbers with a positive sum", _probs)

# result kinds
NONE = Kind("none", "nothing")
BLOCKS = Kind("blocks", "block handles", prefix="b", many=True)
LOOPS = Kind("loops", "loop handles", prefix="l", many=True)
SAMPLED = Kind("sampled", "a sampled value", prefix="v")
SAMPLES = Kind("samples", "sampled values", prefix="v", many=True)


def _describe(v) -> str:
    text = repr(v)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(v).__name__})"


class Spec:
    """What a primitive takes and returns: ``params`` is a list of
    ``(name, kind, variadic)``, ``options`` the keyword-only names with their kinds.

    Example::

        >>> PRIMITIVES["split"].spec.params[1][:2]
        ('factors', Kind(factors))
    """

    def __init__(self, name, fn, kinds: dict, returns: Kind, sampler: bool, mutate,
                 error=ScheduleArgumentError, pure: bool = False):
        self.name = name
        self.error = error
        self.returns = returns
        self.sampler = sampler
        self.mutate = mutate
        # pure: leaves the function unchanged (queries, samplers), so an instruction
        # whose results nothing uses can be dropped from a trace (Trace.simplified)
        self.pure = pure or sampler
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())[2 if sampler else 1:]
        self.params, self.options = [], {}
        self._order = [p.name for p in params
                       if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for p in params:
            if p.name == "decision" and sampler:
                continue
            kind = kinds.get(p.name, ANY)
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and \
                    p.default is p.empty:
                self.params.append((p.name, kind, False))
            elif p.kind == p.VAR_POSITIONAL:
                self.params.append((p.name, kind, True))
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                self.options[p.name] = kind
        self.signature = sig.replace(parameters=[inspect.Parameter(
            "self", inspect.Parameter.POSITIONAL_ONLY)] + params)
        unknown = set(kinds) - {p.name for p in params}
        if unknown:
            raise TypeError(f"@primitive({name!r}): no parameter named {sorted(unknown)}")

    def _fail(self, position, pname, kind, value, why):
        where = f"argument {position}, '{pname}'" if position else f"option '{pname}'"
        found = _describe(value) + (f": {why}" if why else "")
        return schedule_error(kind.error or self.error, self.name, f"{where} to {self.name}: "
                              f"expected {kind.expected}, found {found}")

    def check(self, args, kwargs):
        """``(args, kwargs)`` with every value checked against its kind and normalised
        (a block name becomes a ``BlockRV``); raises ``ScheduleArgumentError``.

        Example::

            >>> PRIMITIVES["split"].spec.check(["x", [2, 4]], {})
            Traceback (most recent call last):
            ...
            cuvil_tir.errors.ScheduleArgumentError: [CVL-E103] argument 1, 'loop' to split: expected a loop handle (from sch.get_loops), found 'x' (str): a block; pass one of sch.get_loops(block)
        """
        out = []
        fixed = [p for p in self.params if not p[2]]
        variadic = next((p for p in self.params if p[2]), None)
        kwargs = dict(kwargs)
        args = list(args)
        # a required parameter given by name is recorded by position, as if so written
        while len(args) < len(fixed) and fixed[len(args)][0] in kwargs:
            args.append(kwargs.pop(fixed[len(args)][0]))
        if variadic is None and len(args) > len(fixed):
            # optional parameters given by position are recorded by name (as attrs)
            names = [n for n in self.options if n not in {p[0] for p in fixed}]
            extra = args[len(fixed):]
            if len(extra) > len(names):
                raise schedule_error(ScheduleArgumentError, self.name, f"{self.name} takes "
                                     f"at most {len(fixed) + len(names)} arguments, found "
                                     f"{len(args)}")
            for key, value in zip(names, extra):
                if key in kwargs:
                    raise schedule_error(ScheduleArgumentError, self.name, f"{key!r} given "
                                         "both by position and by name")
                kwargs[key] = value
            args = args[:len(fixed)]
        for k, value in enumerate(args):
            pname, kind, _ = fixed[k] if k < len(fixed) else variadic
            out.append(self._convert(k + 1, pname, kind, value))
        if len(args) < len(fixed):
            missing = [p[0] for p in fixed[len(args):] if p[0] not in kwargs]
            if missing:
                raise schedule_error(ScheduleArgumentError, self.name, f"{self.name} needs "
                                     f"the argument(s) {', '.join(map(repr, missing))}")
        kw = {}
        for key, value in kwargs.items():
            if key not in self.options:
                raise schedule_error(ScheduleArgumentError, self.name, f"{self.name} has no "
                                     f"option {key!r}; its options are "
                                     f"{sorted(self.options)}")
            pos = self._order.index(key) + 1 if key in self._order else None
            kw[key] = self._convert(pos, key, self.options[key], value)
        return out, kw

    def _convert(self, position, pname, kind, value):
        if kind is ANY:
            return value
        try:
            return kind.convert(value)
        except Mismatch as m:
            raise self._fail(position, pname, kind, value, str(m)) from None

    def result_prefix(self) -> str:
        """The letter the trace names this primitive's results with.

        Example::

            >>> PRIMITIVES["cache_read"].spec.result_prefix()
            'b'
        """
        return self.returns.prefix


class Renamed:
    """What a primitive that renames blocks returns as its result: the ``result`` it
    gives the caller and ``renames``, ``{old block name: new name}``.  The Schedule
    keeps every rename, so that a handle (or a name) of the block from before still
    finds it; the registered function gives direct callers ``result`` alone.

    Example::

        >>> r = Renamed(BlockRV("C_init"), {"C": "C_update"})
        >>> r.result, r.renames
        (BlockRV('C_init'), {'C': 'C_update'})
    """

    __slots__ = ("result", "renames")

    def __init__(self, result, renames: dict):
        self.result, self.renames = result, dict(renames)


def primitive(name: str, /, returns: Kind = NONE, sampler: bool = False, mutate=None,
              error=ScheduleArgumentError, pure: bool = False, **kinds):
    """Register ``fn`` as the primitive ``name`` with the kinds of its arguments.

    The registered function checks its arguments (``fn.spec.check``) then runs.  A
    sampler (``sampler=True``) is ``fn(func, rng, *args, decision=None)`` returning
    ``(values, decision)``; ``mutate(inst, rng)`` gives a new decision for its trace
    instruction ``inst``.  ``error`` is the class of its argument errors (handle
    arguments always raise ``ScheduleArgumentError``).  ``pure=True`` declares that it
    never changes the function (a query; samplers are pure too): a pure instruction
    whose results nothing uses is dead code to :meth:`Trace.simplified`.

    Example::

        >>> PRIMITIVES["split"].spec.returns is LOOPS
        True
    """
    def register(fn):
        spec = Spec(name, fn, kinds, returns, sampler, mutate, error, pure)

        @functools.wraps(fn)
        def checked(func, *args, **kwargs):
            if sampler:
                rng, args = args[0], args[1:]
                decision = kwargs.pop("decision", None)
                args, kwargs = spec.check(list(args), kwargs)
                return fn(func, rng, *args, decision=decision, **kwargs)
            args, kwargs = spec.check(list(args), kwargs)
            new_func, result = fn(func, *args, **kwargs)
            return new_func, result.result if isinstance(result, Renamed) else result

        checked.spec = spec
        checked.raw = fn
        checked.primitive_name = name
        PRIMITIVES[name] = checked
        return checked
    return register


def make_method(name: str):
    """The ``Schedule`` method of primitive ``name``: it forwards to ``sch._apply`` and
    carries the primitive's signature and docstring.

    Example::

        >>> import schedules as S
        >>> S.Schedule.split.__doc__ == PRIMITIVES["split"].__doc__
        True
    """
    fn = PRIMITIVES[name]
    spec = fn.spec

    def method(self, *args, **kwargs):
        # not _apply(name, ...): a primitive's own option may be called "name"
        # (get_block(name="B"))
        return self._run(name, list(args), kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = fn.__doc__
    method.__signature__ = spec.signature
    return method


def install_methods(cls) -> None:
    """Give ``cls`` a method for every registered primitive it does not define itself.

    Example::

        >>> import schedules as S
        >>> callable(S.Schedule.rfactor)
        True
    """
    for name in PRIMITIVES:
        if not any(name in base.__dict__ for base in cls.__mro__):
            setattr(cls, name, make_method(name))
