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

from cuvil_tir.deep import deep_ok
from cuvil_tir.errors import LoweringError
from cuvil_tir.analysis import tree
from cuvil_tir.region_check import verify_block_regions
from cuvil_tir.function import PrimFunc
from cuvil_tir.ir_module import IRModule

from . import primitives as _primitives  # noqa: F401  (registers every primitive)
from .errors import (RENDER_LEVELS, ForeignHandleError, RegionContractError,
                     ScheduleArgumentError, ScheduleError, UnknownPrimitiveError,
                     WorkOnError, condense, schedule_error)
from .handles import BlockRV, LoopRV, home_free
from .primitive import PRIMITIVES, Renamed, install_methods
from .sampling import Sampled
from .trace import Instruction, Trace, encode, flatten
from .analysis import block_path, loop_path
from .debug import DebugChecker


def _key(rv):
    if isinstance(rv, BlockRV):
        return ("block", rv.func, rv.name)
    if isinstance(rv, LoopRV):
        return ("loop", rv.func, id(rv.var))
    return ("value", id(rv))


def _check_regions(name: str, old: PrimFunc, new: PrimFunc) -> None:
    """Refuse a step whose result has a block accessing outside what it or a block
    around it declares: primitives size copies and move blocks by declared regions,
    and its printed text would not parse back.  Only the blocks the step made are
    checked (see :func:`~cuvil_tir.region_check.verify_block_regions`)."""
    try:
        verify_block_regions(new, since=old)
    except LoweringError as err:
        raise schedule_error(RegionContractError, name, "the result breaks the region "
                             f"contract: {err.message}\n  the step is refused; this is "
                             "a defect of the primitive: please report it with the "
                             "schedule's trace", new) from None


class Schedule:
    """Schedule ``func``; ``debug=True`` checks every step, ``seed`` fixes sampling,
    ``error_render`` says how much a refusal's message says: ``"detail"`` (the reason,
    then the IR with the culprit marked, rendered only when the message is read),
    ``"fast"`` (the kind of refusal in one fixed line: refusals can be counted by
    message) or ``"none"`` (``(not rendered)``); the error's class and code are the same.
    ``memo``: a :class:`~schedules.step_memo.StepMemo` shared by the schedules of one
    search, which gives back the steps already taken from the same function with the
    same arguments (not in debug mode, nor on a module of several functions).

    Every primitive is a method generated from its registration (see
    :func:`schedules.primitive.install_methods`): ``help(sch.split)`` shows the
    primitive's own docstring.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> Schedule(f).func is f
        True
    """

    @deep_ok
    def __init__(self, func: PrimFunc | IRModule, debug: bool = False, seed=None,
                 error_render: str = "detail", memo=None):
        if not isinstance(func, (PrimFunc, IRModule)):
            raise schedule_error(ScheduleArgumentError, "Schedule", f"expected a PrimFunc "
                                 f"(e.g. from T.create_prim_func) or an IRModule, got "
                                 f"{type(func).__name__}")
        if error_render not in RENDER_LEVELS:
            raise schedule_error(ScheduleArgumentError, "Schedule", f"error_render: "
                                 f"expected one of {', '.join(map(repr, RENDER_LEVELS))}, "
                                 f"got {error_render!r}")
        self.error_render = error_render
        functions = (func,) if isinstance(func, PrimFunc) else func.functions
        for f in functions:
            # primitives trust declared regions: a block whose T.reads under-states its
            # body would be scheduled into wrong results
            verify_block_regions(f)
        self._module = func if isinstance(func, IRModule) else None
        self._funcs = {f.name: f for f in functions}
        # TVM's rule: the only function, else the one called main, else none until
        # work_on names one
        names = list(self._funcs)
        self._working = names[0] if len(names) == 1 else ("main" if "main" in names
                                                          else None)
        self._trace = Trace()
        self.debug = debug
        self.seed = seed
        self._rng = random.Random(seed)
        self._rvs: list = []          # every handle the trace produced (keeps ids alive)
        self._index: dict = {}        # _key(handle) -> trace index
        self._retired: dict = {}      # id(handle) -> handle removed by remove_rv (kept alive)
        self._checker = None          # debug mode's DebugChecker, made at the first step
        self._origin = func           # the unscheduled function (debug mode's twin)
        self._renamed: dict = {}      # (function, old block name) -> its name now
        self._memo = memo             # a StepMemo shared by a search's schedules, or None

    # state ------------------------------------------------------------------------------

    @property
    def func(self) -> PrimFunc:
        """The current PrimFunc of the function worked on (immutable; each primitive
        makes a new one)."""
        return self._funcs[self._working_name("func")]

    @property
    def trace(self) -> Trace:
        """The instructions applied so far."""
        return self._trace

    @property
    def _func(self):
        return self._funcs.get(self._working) if self._working is not None else None

    @_func.setter
    def _func(self, new):
        self._funcs[self._working_name("func")] = new

    @property
    def mod(self) -> IRModule:
        """The whole module: every function, the scheduled ones as they are now (a
        schedule of one PrimFunc gives a module of that one function).

        Example::

            >>> import cuvil_tir as T
            >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
            >>> Schedule(f).mod.functions[0].name
            'main'
        """
        if self._module is None:
            return IRModule.from_func(self.func)
        return IRModule(tuple(self._funcs.values()), self._module.attrs)

    @property
    def func_working_on(self) -> str | None:
        """The name of the function that block names and new handles refer to (None
        while a module of several functions, none of them ``main``, has had no
        ``work_on``).

        Example::

            >>> import cuvil_tir as T
            >>> Schedule(T.create_prim_func([T.placeholder((2,), name="A")])).func_working_on
            'main'
        """
        return self._working

    def work_on(self, func_name: str) -> None:
        """Schedule the function ``func_name`` of the module from now on: ``get_block``
        looks blocks up there (unless given ``func_name=``).  Handles already taken
        keep pointing into their own function, and a primitive acts on the function
        of the handles it is given.  Traced, so a trace replays on the module.

        A module of one function, or with one called ``main``, starts on it; a module
        of several functions and no ``main`` starts on none, and ``get_block`` before
        ``work_on`` raises :class:`WorkOnError`.

        Before (a module of two functions, neither called ``main``)::

            for i in T.serial(8):           # in add_one
                with T.block("B"): ...
            for i in T.serial(8):           # in double
                with T.block("B"): ...

        ``sch.work_on("double"); sch.split(sch.get_loops("B")[0], [2, 4])``, after:
        ``double`` has the loops ``i_0, i_1`` and ``add_one`` is unchanged.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> add = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0,
            ...                                        name="B")])
            >>> dbl = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0,
            ...                                        name="B")])
            >>> mod = T.IRModule((add.with_attr("global_symbol", "add_one"),
            ...                   dbl.with_attr("global_symbol", "double")))
            >>> sch = Schedule(mod)
            >>> sch.work_on("double")
            >>> _ = sch.split(sch.get_loops("B")[0], [2, 4])
            >>> [len(sch.get_loops(sch.get_block("B", func_name=n))) for n in
            ...  ("add_one", "double")]
            [1, 2]
        """
        self._run("work_on", [func_name], {})

    def _work_on(self, args, kwargs):
        if kwargs or len(args) != 1 or not isinstance(args[0], str):
            raise schedule_error(WorkOnError, "work_on", "expected one function name (a "
                                 f"str), found {', '.join(map(repr, args))} "
                                 f"{kwargs or ''}".rstrip())
        self._function("work_on", args[0])
        self._working = args[0]
        self._trace = self._trace._recorded(Instruction("work_on", [args[0]], {}, [], None))

    def _function(self, where: str, name: str) -> PrimFunc:
        if name not in self._funcs:
            raise schedule_error(WorkOnError, where, f"the module has no function "
                                 f"{name!r}; its functions are "
                                 f"{', '.join(map(repr, self._funcs))}")
        return self._funcs[name]

    def _working_name(self, where: str) -> str:
        if self._working is None:
            raise schedule_error(WorkOnError, where, f"{where} does not know which "
                                 "function to be working on: the module has the functions "
                                 f"{', '.join(map(repr, self._funcs))} and none is called "
                                 "'main'; call sch.work_on(name) first, or pass "
                                 "func_name= to get_block")
        return self._working

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
        new._module = self._module
        new._funcs = dict(self._funcs)
        new._working = self._working
        new._trace = self._trace
        new.debug = self.debug
        new.error_render = self.error_render
        new.seed = self.seed
        new._rng = random.Random()
        new._rng.setstate(self._rng.getstate())
        new._rvs = list(self._rvs)
        new._index = dict(self._index)
        new._retired = dict(self._retired)
        new._checker = self._checker.fork() if self._checker is not None else None
        new._origin = self._origin
        new._renamed = dict(self._renamed)
        new._memo = self._memo
        return new

    def show(self) -> None:
        """Print the current function (its text form)."""
        print(self.func)

    def __repr__(self) -> str:
        name = self._working if self._working is not None else "no function chosen"
        return f"Schedule({name}, {len(self._trace)} instructions)"

    # the one path every primitive takes --------------------------------------------------

    @deep_ok
    def _apply(self, name: str, *args, **kwargs):
        return self._run(name, list(args), kwargs)

    @deep_ok
    def _run(self, name: str, args: list, kwargs: dict):
        try:
            # copies: a retry on a big stack (deep_ok) sees the arguments as given
            return self._step(name, list(args), dict(kwargs))
        except ScheduleError as err:
            condense(err, self.error_render, name)
            raise

    def _step(self, name: str, args: list, kwargs: dict):
        if name == "work_on":
            return self._work_on(args, kwargs)
        fn = PRIMITIVES.get(name)
        if fn is None:
            raise schedule_error(UnknownPrimitiveError, name, "this primitive is not "
                                 "registered (its module is not imported by "
                                 "schedules/primitives/__init__.py); registered: "
                                 f"{', '.join(sorted(PRIMITIVES))}")
        spec = fn.spec
        decision = kwargs.pop("decision", None) if spec.sampler else None
        self._check_not_removed(name, list(args) + list(kwargs.values()))
        # checked and normalised first: the trace records block names as handles
        args, kwargs = spec.check(args, kwargs)
        # TVM's get_block(name, func_name): a block of another function, without
        # switching the function worked on
        home = self._home(name, args, kwargs, kwargs.get("func_name") if name == "get_block"
                          else None)
        args, kwargs = self._follow_renames(home, name, args, kwargs)
        self._check_own_loops(name, args)
        old = self._funcs[home]
        call_args, call_kwargs = (home_free(args), home_free(kwargs)) if self._multi \
            else (args, kwargs)
        if spec.sampler:
            rng_state = self._rng.getstate()
            result, decision = fn.raw(old, self._rng, *call_args, decision=decision,
                                      **call_kwargs)
            new_func = old
        else:
            new_func, result = self._primitive(fn, name, old, call_args, call_kwargs)
        renames = {}
        if isinstance(result, Renamed):
            result, renames = result.result, result.renames
        try:
            # after the primitive, so that its legality message comes first
            inputs = encode(args, self._index_of, name)
            attrs = {k: encode(v, self._index_of, name) for k, v in kwargs.items()}
        except Exception:
            if spec.sampler:
                self._rng.setstate(rng_state)
            raise
        if self.debug and new_func is not old:
            if self._checker is None:
                self._checker = DebugChecker(self._origin, type(self))
            start = len(self._rvs)
            made = [k for k, rv in enumerate(rv for rv in flatten(result)
                                             if isinstance(rv, (BlockRV, LoopRV, Sampled)))]
            step = Instruction(name, inputs, attrs, [start + k for k in made], decision)
            self._checker.check(name, old, new_func, self._trace.insts, step)
        outputs = []
        for rv in flatten(result):
            if isinstance(rv, (BlockRV, LoopRV)) and self._multi:
                rv.func = home
            if isinstance(rv, (BlockRV, LoopRV, Sampled)):
                outputs.append(self._register(rv))
        self._funcs[home] = new_func
        for before, after in renames.items():
            self._renamed[(home, before)] = after
        self._trace = self._trace._recorded(Instruction(name, inputs, attrs, outputs,
                                                        decision))
        return result

    def _primitive(self, fn, name, old, args, kwargs):
        """``(new function, result)`` of the non-sampling primitive ``fn`` applied to
        ``old``, checked against the region contract; through the memo when there is
        one (a remembered step was checked when first taken)."""
        memo = self._memo if not (self.debug or self._multi) else None
        key = memo.key(fn, old, args, kwargs) if memo is not None else None
        if key is not None:
            got = memo.get(key, args, kwargs)
            if got is not None:
                return got
        new_func, result = fn.raw(old, *args, **kwargs)
        if new_func is not old:
            _check_regions(name, old, new_func)
        if key is not None:
            memo.put(key, fn, old, args, kwargs, new_func, result)
        return new_func, result

    def _follow_renames(self, home, name, args, kwargs):
        """``args`` / ``kwargs`` with each block handle (and get_block's name) of a
        block a primitive renamed turned into the block's name now (TVM's handles
        follow their block: decompose_reduction's ``C`` is then ``C_update``)."""
        if not self._renamed:
            return args, kwargs
        names = {b.block.name for b in tree.blocks_under(self._funcs[home].body)}

        def now(block_name):
            seen = set()
            while block_name not in names and (home, block_name) in self._renamed and \
                    block_name not in seen:
                seen.add(block_name)
                block_name = self._renamed[(home, block_name)]
            return block_name

        def follow(v):
            if isinstance(v, BlockRV) and v.name is not None and v.name not in names:
                new = now(v.name)
                return v if new == v.name else BlockRV(new, v.func)
            if isinstance(v, (list, tuple)):
                return type(v)(follow(x) for x in v)
            return v

        args = [follow(a) for a in args]
        if name == "get_block" and args and isinstance(args[0], str):
            args[0] = now(args[0])
        return args, {k: follow(v) for k, v in kwargs.items()}

    @property
    def _multi(self) -> bool:
        return len(self._funcs) > 1

    def _home(self, name, args, kwargs, func_name=None) -> str:
        """The function a primitive acts on: that of its handles (all in one), else
        ``func_name`` (get_block's), else the function worked on."""
        if func_name is not None:
            self._function(name, func_name)
            return func_name
        homes = {rv.func if rv.func is not None else self._working
                 for rv in flatten([args, list(kwargs.values())])
                 if isinstance(rv, (BlockRV, LoopRV))} if self._multi else set()
        if len(homes) > 1:
            raise schedule_error(WorkOnError, name, "its handles point into several "
                                 f"functions ({', '.join(sorted(map(repr, homes - {None})))}"
                                 "); a primitive acts on one function: pass handles of "
                                 "one function (a block name means a block of the "
                                 "function worked on)")
        home = homes.pop() if homes else self._working
        return home if home is not None else self._working_name(name)

    def _check_own_loops(self, name, args):
        # before the primitive: resolving a foreign loop in this function would
        # misreport it as a loop a primitive replaced
        for rv in flatten(args):
            if isinstance(rv, LoopRV) and self._index_of(rv) is None:
                raise schedule_error(ForeignHandleError, name, f"{rv!r} was not produced "
                                     "by this schedule (it is a handle of another "
                                     "Schedule, or was built by hand); get loop handles "
                                     "from this schedule's get_loops or its primitives' "
                                     "results")

    def _check_not_removed(self, name, args):
        for rv in flatten(args):
            if isinstance(rv, (BlockRV, LoopRV, Sampled)) and id(rv) in self._retired:
                raise schedule_error(ForeignHandleError, name, f"{rv!r} was removed from "
                                     "this schedule by remove_rv; get a new handle (for "
                                     "a block, get_block by its name)")

    def remove_rv(self, handle) -> None:
        """Retire ``handle`` (a BlockRV, LoopRV or sampled value of this schedule): using
        it afterwards, in ``get`` or a primitive, raises ``ForeignHandleError`` (an
        ``IndexError``).  The function and the trace are unchanged; a block stays
        reachable through a new ``get_block``.  Not traced.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> (i,) = sch.get_loops("B")
            >>> sch.remove_rv(i)
            >>> sch.get(i)
            Traceback (most recent call last):
            ...
            schedules.errors.ForeignHandleError: [CVL-E103] get: LoopRV(i) was removed ...
        """
        if not isinstance(handle, (BlockRV, LoopRV, Sampled)):
            raise schedule_error(ScheduleArgumentError, "remove_rv", "expected a BlockRV, "
                                 f"a LoopRV or a sampled value, found "
                                 f"{type(handle).__name__} {handle!r}")
        # a later get_block / get_loops returns a handle equal to this one, which stays
        # usable: what is removed is this one object
        self._retired[id(handle)] = handle

    # inspecting ----------------------------------------------------------------------------

    def get(self, handle):
        """What ``handle`` names in the current function: a BlockRV (or a block name)
        its ``Block``, a LoopRV its ``For``, a sampled value its int.  Not traced.

        A loop handle this schedule did not produce raises ``ForeignHandleError``; a
        loop a primitive replaced (``split``'s input) raises ``ScheduleError``.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((8,), name="A")
            >>> sch = Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
            ...                                                 name="B")]))
            >>> io, ii = sch.split(sch.get_loops("B")[0], [2, 4])
            >>> sch.get(ii).extent.value, sch.get("B").name
            (4, 'B')
        """
        self._check_not_removed("get", [handle])
        if isinstance(handle, (BlockRV, str)):
            rv = BlockRV(handle) if isinstance(handle, str) else handle
            home = self._home("get", [rv], {})
            func = self._funcs[home]
            (rv,), _ = self._follow_renames(home, "get", [rv], {})
            return tree.get(func, block_path(func, home_free(rv), "get")).block
        if isinstance(handle, Sampled):
            if self._index_of(handle) is None:
                raise schedule_error(ForeignHandleError, "get", f"sampled value {handle!r} "
                                     "was not drawn by this schedule")
            return int(handle)
        if isinstance(handle, LoopRV):
            self._check_own_loops("get", [handle])
            func = self._funcs[self._home("get", [handle], {})]
            return tree.get(func, loop_path(func, home_free(handle), "get"))
        raise schedule_error(ScheduleArgumentError, "get", f"expected a BlockRV, a block "
                             f"name, a LoopRV or a sampled value, found "
                             f"{type(handle).__name__} {handle!r}")

    def _index_of(self, rv):
        return self._index.get(_key(rv))

    def _register(self, rv) -> int:
        idx = len(self._rvs)
        self._rvs.append(rv)
        self._index[_key(rv)] = idx
        return idx


install_methods(Schedule)
