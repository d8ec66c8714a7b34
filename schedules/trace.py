"""The trace: every primitive a schedule applied, serialisable and replayable.

An :class:`Instruction` names a primitive, its inputs (handles by *trace index*, the
position at which the trace first produced them; everything else as JSON values), its
keyword attributes, the trace indices of the handles it returned, and, for a sampling
primitive, its decision.  ``Trace.as_json()`` writes it; ``Trace.from_json(text)
.apply(func)`` replays it on the unscheduled function; ``with_decisions`` swaps the
decisions of sampling instructions, which is how a search explores candidates.

A trace can also be built by hand: give an instruction handle objects as inputs and
outputs (fresh ones, ``BlockRV()`` / ``LoopRV()``, or ``T.var`` for a sampled value)
and :class:`Trace` numbers them.  ``simplified`` drops instructions whose results
nothing uses; ``apply_to`` replays onto an existing schedule; instructions after
``sch.enter_postproc()`` are post-processing, which both can leave out.

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")])
    >>> sch = S.Schedule(f)
    >>> (i,) = sch.get_loops(sch.get_block("B"))
    >>> _ = sch.split(i, [None, 4])
    >>> print(sch.trace)
    b0 = sch.get_block('B')
    (l1,) = sch.get_loops(b0)
    l2, l3 = sch.split(l1, [None, 4])
    >>> T.structural_equal(S.Trace.from_json(sch.trace.as_json()).apply(f).func, sch.func)
    True
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
import cuvil_tir.expr as E

from .errors import TraceError, schedule_error
from .trace_values import (decode, decode_expr, decode_index_map, encode,  # noqa: F401
                           encode_expr, encode_index_map, flatten, holds_handle, map_rvs)
from .primitive import PRIMITIVES, SAMPLED

FORMAT = "cuvil-trace"
VERSION = 1
POSTPROC = "enter_postproc"
"""The instruction after which a trace's instructions are post-processing."""


@dataclass(frozen=True, eq=False)
class Instruction:
    """One applied primitive: ``name``, positional ``inputs``, keyword ``attrs``, the
    ``outputs`` and a sampler's ``decision``.  Instructions compare (and hash) by
    identity, so they can key a dict.

    In a recorded trace, handles are trace indices (``{"rv": k}`` in inputs, ``k`` in
    outputs).  Built by hand, inputs and outputs may hold handle objects instead;
    :class:`Trace` numbers them.

    Example::

        >>> Instruction("get_block", ["C"], {}, [0]).outputs
        [0]
        >>> from schedules.handles import BlockRV
        >>> b = BlockRV()
        >>> t = Trace([Instruction("get_block", ["C"], {}, [b]),
        ...            Instruction("compute_inline", [b])])
        >>> t[1].inputs
        [{'rv': 0}]
    """

    name: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    outputs: list = field(default_factory=list)
    decision: object = None

    def as_dict(self) -> dict:
        """The JSON object of this instruction.

        Example::

            >>> Instruction("get_block", ["C"], {}, [0]).as_dict()["name"]
            'get_block'
        """
        d = {"name": self.name, "inputs": self.inputs, "attrs": self.attrs,
             "outputs": self.outputs}
        if self.decision is not None:
            d["decision"] = self.decision
        return d


class Trace:
    """An immutable sequence of instructions.

    Example::

        >>> len(Trace())
        0
    """

    def __init__(self, insts=()):
        self.insts = _numbered(tuple(insts))

    @classmethod
    def _of(cls, insts: tuple) -> "Trace":
        # instructions already numbered (recorded, sliced, simplified)
        t = cls.__new__(cls)
        t.insts = insts
        return t

    def __len__(self) -> int:
        return len(self.insts)

    def __iter__(self):
        return iter(self.insts)

    def __getitem__(self, k):
        """An instruction, or for a slice a Trace (``trace[:-1]`` drops the last).

        Example::

            >>> t = Trace([Instruction("get_block", ["C"], {}, [0])])
            >>> len(t[:-1]), t[0].name
            (0, 'get_block')
        """
        if isinstance(k, slice):
            return Trace._of(self.insts[k])
        return self.insts[k]

    def __eq__(self, other):
        return isinstance(other, Trace) and self.as_json() == other.as_json()

    def __hash__(self):
        return hash(self.as_json())

    def append(self, inst: Instruction) -> "Trace":
        """A new trace with ``inst`` at the end.

        Example::

            >>> len(Trace().append(Instruction("get_block", ["C"], {}, [0])))
            1
        """
        if _is_raw(inst):
            return Trace(self.insts + (inst,))
        return self._recorded(inst)

    def _recorded(self, inst: Instruction) -> "Trace":
        # a schedule's own step, already encoded: no scan for handle objects
        return Trace._of(self.insts + (inst,))

    @property
    def decisions(self) -> dict:
        """``{instruction index: decision}`` of the sampling instructions.

        Example::

            >>> Trace().decisions
            {}
        """
        return {k: inst.decision for k, inst in enumerate(self.insts)
                if inst.decision is not None}

    def with_decisions(self, decisions: dict) -> "Trace":
        """A copy with the decisions of the given sampling instructions replaced.

        Example::

            >>> t = Trace([Instruction("sample_categorical", [[1, 2], [1, 1]], {}, [0], 0)])
            >>> t.with_decisions({0: 1}).decisions
            {0: 1}
        """
        insts = list(self.insts)
        for k, dec in decisions.items():
            if not (isinstance(k, int) and 0 <= k < len(insts)) or insts[k].decision is None:
                raise schedule_error(TraceError, "with_decisions", f"instruction {k!r} is "
                                     "not a sampling instruction of this trace; sampling "
                                     f"instructions are {sorted(self.decisions)}")
            old = insts[k]
            insts[k] = Instruction(old.name, old.inputs, old.attrs, old.outputs,
                                   list(dec) if isinstance(dec, tuple) else dec)
        return Trace(insts)

    def as_json(self, indent=None) -> str:
        """The trace as JSON text.

        Example::

            >>> Trace().as_json()
            '{"format": "cuvil-trace", "version": 1, "insts": []}'
        """
        return json.dumps({"format": FORMAT, "version": VERSION,
                           "insts": [i.as_dict() for i in self.insts]}, indent=indent)

    @staticmethod
    def from_json(text: str) -> "Trace":
        """Read a trace written by :meth:`as_json`.

        Example::

            >>> len(Trace.from_json(Trace().as_json()))
            0
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise schedule_error(TraceError, "Trace.from_json", f"not JSON: {err}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise schedule_error(TraceError, "Trace.from_json", f"expected an object with "
                                 f"\"format\": \"{FORMAT}\", got {str(data)[:60]!r}")
        if data.get("version") != VERSION:
            raise schedule_error(TraceError, "Trace.from_json", f"expected version "
                                 f"{VERSION}, got {data.get('version')!r}")
        return Trace(Instruction(d["name"], d["inputs"], d.get("attrs", {}),
                                 d.get("outputs", []), d.get("decision"))
                     for d in data["insts"])

    def apply(self, func, debug: bool = False, seed=None, remove_postproc: bool = False):
        """Replay on ``func`` (the unscheduled function); returns the new Schedule.

        Example::

            >>> import cuvil_tir as T
            >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
            >>> Trace().apply(f).func is f
            True
        """
        from .schedule import Schedule
        return self.apply_to(Schedule(func, debug=debug, seed=seed), remove_postproc)

    def apply_to(self, sch, remove_postproc: bool = False):
        """Replay the instructions onto the schedule ``sch`` (they append to its trace);
        with ``remove_postproc`` stop at ``enter_postproc``.  Returns ``sch``.

        Example::

            >>> import cuvil_tir as T
            >>> import schedules as S
            >>> A = T.placeholder((4,), name="A")
            >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
            >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i] + 1.0, name="C")])
            >>> b = S.BlockRV()
            >>> t = Trace([Instruction("get_block", ["B"], {}, [b]),
            ...            Instruction("compute_inline", [b])])
            >>> sch = t.apply_to(S.Schedule(f))
            >>> [blk.name for blk in sch.get_child_blocks("root")]
            ['C']
        """
        values: dict = {}
        for k, inst in enumerate(self.before_postproc() if remove_postproc else self.insts):
            args = [decode(a, values, k) for a in inst.inputs]
            kwargs = {key: decode(v, values, k) for key, v in inst.attrs.items()}
            if inst.decision is not None:
                kwargs["decision"] = inst.decision
            out = sch._run(inst.name, args, kwargs)
            # a query's answer (can_decompose_padding's bool) is no handle to record
            produced = [r for r in flatten(out) if not isinstance(r, bool)]
            if len(produced) != len(inst.outputs):
                raise schedule_error(TraceError, "replay", f"instruction {k} ({inst.name}) "
                                     f"returned {len(produced)} values on replay, the "
                                     f"trace recorded {len(inst.outputs)}")
            for idx, rv in zip(inst.outputs, produced):
                values[idx] = rv
        return sch

    def before_postproc(self) -> "Trace":
        """The instructions before the first ``enter_postproc`` (all when none).

        Example::

            >>> t = Trace([Instruction("get_block", ["B"], {}, [0]),
            ...            Instruction("enter_postproc", []),
            ...            Instruction("compute_inline", [{"rv": 0}])])
            >>> len(t.before_postproc())
            1
        """
        cut = next((k for k, i in enumerate(self.insts) if i.name == POSTPROC),
                   len(self.insts))
        return Trace._of(self.insts[:cut])

    def simplified(self, remove_postproc: bool = False) -> "Trace":
        """A copy without dead code: instructions that leave the function unchanged
        (queries, samplers) and whose results no later instruction uses; with
        ``remove_postproc`` also without ``enter_postproc`` and what follows it.
        Handles are renumbered in order.

        Example::

            >>> t = Trace([Instruction("get_block", ["B"], {}, [0]),
            ...            Instruction("get_block", ["C"], {}, [1]),
            ...            Instruction("compute_inline", [{"rv": 1}])])
            >>> print(t.simplified())
            b0 = sch.get_block('C')
            sch.compute_inline(b0)
        """
        insts = list(self.before_postproc() if remove_postproc else self.insts)
        used: set = set()
        kept = []
        for inst in reversed(insts):
            spec = getattr(PRIMITIVES.get(inst.name), "spec", None)
            if spec is not None and spec.pure and used.isdisjoint(inst.outputs):
                continue
            kept.append(inst)
            map_rvs([inst.inputs, list(inst.attrs.values())], lambda k: used.add(k) or k)
        kept.reverse()
        new = {old: n for n, old in enumerate(o for inst in kept for o in inst.outputs)}
        return Trace._of(tuple(
            Instruction(i.name, map_rvs(i.inputs, new.get),
                        {key: map_rvs(v, new.get) for key, v in i.attrs.items()},
                        [new[o] for o in i.outputs], i.decision) for i in kept))

    def as_python(self) -> str:
        """The trace as the Python calls that made it.

        Example::

            >>> Trace([Instruction("get_block", ["C"], {}, [0])]).as_python()
            "b0 = sch.get_block('C')"
        """
        names: dict = {}
        lines = []
        for inst in self.insts:
            args = [_py(a, names) for a in inst.inputs]
            args += [f"{k}={_py(v, names)}" for k, v in inst.attrs.items()]
            if inst.decision is not None:
                args.append(f"decision={inst.decision!r}")
            call = f"sch.{inst.name}({', '.join(args)})"
            returns = _returns(inst.name)
            outs = []
            for idx in inst.outputs:
                names[idx] = f"{returns.prefix}{idx}"
                outs.append(names[idx])
            target = ", ".join(outs)
            if returns.many and len(outs) == 1:
                target = f"({target},)"     # a list of one: unpack it, as written by hand
            lines.append((target + " = " if outs else "") + call)
        return "\n".join(lines)

    def mutate(self, rng) -> "Trace | None":
        """A copy with the decision of one sampling instruction (drawn with ``rng``)
        redrawn by that sampler's ``mutate``; None when the trace samples nothing.

        Example::

            >>> import random
            >>> t = Trace([Instruction("sample_categorical", [[1, 2], [1, 1]], {}, [0], 0)])
            >>> t.mutate(random.Random(0)).decisions[0] in (0, 1)
            True
        """
        candidates = [k for k in sorted(self.decisions)
                      if getattr(PRIMITIVES.get(self.insts[k].name), "spec", None) is not None
                      and PRIMITIVES[self.insts[k].name].spec.mutate is not None]
        if not candidates:
            return None
        k = rng.choice(candidates)
        inst = self.insts[k]
        return self.with_decisions({k: PRIMITIVES[inst.name].spec.mutate(inst, rng)})

    def __str__(self) -> str:
        return self.as_python()

    __repr__ = __str__


def _returns(name: str):
    fn = PRIMITIVES.get(name)
    return fn.spec.returns if hasattr(fn, "spec") else SAMPLED


def _is_raw(inst) -> bool:
    """Whether ``inst`` was built by hand with handle objects (not yet numbered)."""
    return any(not isinstance(o, int) for o in inst.outputs) or \
        holds_handle(inst.inputs) or holds_handle(inst.attrs)


def _numbered(insts: tuple) -> tuple:
    """``insts`` with the handle objects of hand-built instructions replaced by trace
    indices: each output gets the next index, each use of it refers to that index."""
    if not any(_is_raw(inst) for inst in insts):
        return insts
    index: dict = {}                  # id(handle) -> trace index
    handles: list = []                # keeps the handles alive while ids are keys
    nxt = 0
    out = []
    for k, inst in enumerate(insts):
        if not _is_raw(inst):
            nxt = max([nxt] + [o + 1 for o in inst.outputs])
            out.append(inst)
            continue
        where = f"Trace: instruction {k} ({inst.name})"

        def index_of(rv):
            return index.get(id(rv))

        inputs = encode(list(inst.inputs), index_of, where)
        attrs = {key: encode(v, index_of, where) for key, v in inst.attrs.items()}
        outputs = []
        for rv in inst.outputs:
            if isinstance(rv, int) or id(rv) in index:
                raise schedule_error(TraceError, where, f"output {rv!r}: expected a fresh "
                                     "handle (BlockRV(), LoopRV(), T.var(...)) that no "
                                     "earlier instruction produced; do not mix trace "
                                     "indices and handles in one instruction")
            index[id(rv)] = nxt
            handles.append(rv)
            outputs.append(nxt)
            nxt += 1
        out.append(Instruction(inst.name, inputs, attrs, outputs, inst.decision))
    return tuple(out)


def _py_index_map(d) -> str:
    """An encoded index map as a lambda that replays when pasted (``S`` is the
    ``schedules`` package, for an axis separator; ``T`` ``cuvil_tir``, for ``T.min``).

    Example::

        >>> _py_index_map(encode_index_map(lambda i, j: (j // 4, i, j % 4)))
        'lambda i, j: (j // 4, i, j % 4)'
    """
    stand = [E.Var(n, d.get("dtype", "int32")) for n in d["params"]]
    parts = ["S.AXIS_SEPARATOR" if isinstance(r, dict) and r.get("axis_separator")
             else str(decode_expr(r, stand)) for r in d["results"]]
    body = f"({', '.join(parts)}{',' if len(parts) == 1 else ''})" if d["tuple"] \
        else parts[0]
    return f"lambda {', '.join(d['params'])}: {body}"


def _py(v, names) -> str:
    if isinstance(v, dict) and "block" in v and len(v) == 1:
        return repr(v["block"])
    if isinstance(v, dict) and "rv" in v:
        return names.get(v["rv"], f"v{v['rv']}")
    if isinstance(v, list):
        return "[" + ", ".join(_py(x, names) for x in v) + "]"
    if isinstance(v, dict) and "derived" in v:
        op, a, b = v["derived"]
        sym = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%"}[op]
        return f"({_py(a, names)} {sym} {_py(b, names)})"
    if isinstance(v, dict) and "index_map" in v:
        return _py_index_map(v["index_map"])
    if isinstance(v, dict) and "dict" in v:    # a recorded dict argument (annotate)
        return "{" + ", ".join(f"{k!r}: {_py(x, names)}" for k, x in v["dict"].items()) + "}"
    return repr(v)
