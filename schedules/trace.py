"""The trace: every primitive a schedule applied, serialisable and replayable.

An :class:`Instruction` names a primitive, its inputs (handles by *trace index*, the
position at which the trace first produced them; everything else as JSON values), its
keyword attributes, the trace indices of the handles it returned, and, for a sampling
primitive, its decision.  ``Trace.as_json()`` writes it; ``Trace.from_json(text)
.apply(func)`` replays it on the unscheduled function; ``with_decisions`` swaps the
decisions of sampling instructions, which is how a search explores candidates.

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
    l1 = sch.get_loops(b0)
    l2, l3 = sch.split(l1, [None, 4])
    >>> T.structural_equal(S.Trace.from_json(sch.trace.as_json()).apply(f).func, sch.func)
    True
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field

import cuvil_tir.expr as E
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import DTypeError
from cuvil_tir.node import Node, field_names

from .errors import TraceError, schedule_error

FORMAT = "cuvil-trace"
VERSION = 1


@dataclass(frozen=True)
class Instruction:
    """One applied primitive.

    Example::

        >>> Instruction("get_block", ["C"], {}, [0]).outputs
        [0]
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
        self.insts = tuple(insts)

    def __len__(self) -> int:
        return len(self.insts)

    def __iter__(self):
        return iter(self.insts)

    def __getitem__(self, k):
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
        return Trace(self.insts + (inst,))

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

    def apply(self, func, debug: bool = False, seed=None):
        """Replay on ``func`` (the unscheduled function); returns the new Schedule.

        Example::

            >>> import cuvil_tir as T
            >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
            >>> Trace().apply(f).func is f
            True
        """
        from .schedule import Schedule
        sch = Schedule(func, debug=debug, seed=seed)
        values: dict = {}
        for k, inst in enumerate(self.insts):
            args = [decode(a, values, k) for a in inst.inputs]
            kwargs = {key: decode(v, values, k) for key, v in inst.attrs.items()}
            if inst.decision is not None:
                kwargs["decision"] = inst.decision
            out = sch._run(inst.name, args, kwargs)
            produced = flatten(out)
            if len(produced) != len(inst.outputs):
                raise schedule_error(TraceError, "replay", f"instruction {k} ({inst.name}) "
                                     f"returned {len(produced)} values on replay, the "
                                     f"trace recorded {len(inst.outputs)}")
            for idx, rv in zip(inst.outputs, produced):
                values[idx] = rv
        return sch

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
            outs = []
            prefix = _result_prefix(inst.name)
            for idx in inst.outputs:
                names[idx] = f"{prefix}{idx}"
                outs.append(names[idx])
            lines.append((", ".join(outs) + " = " if outs else "") + call)
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
        from .primitive import PRIMITIVES
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


def flatten(result) -> list:
    """The handles / sampled values a primitive returned, as a flat list.

    Example::

        >>> flatten(None), flatten([1, [2, 3]])
        ([], [1, 2, 3])
    """
    if result is None:
        return []
    if isinstance(result, (list, tuple)):
        out = []
        for r in result:
            out.extend(flatten(r))
        return out
    return [result]


# value encoding ---------------------------------------------------------------------

def encode(value, index_of, where: str):
    """A JSON-able form of a primitive argument; ``index_of(rv)`` gives trace indices.

    Example::

        >>> encode([None, 4], lambda rv: None, "split")
        [None, 4]
    """
    from .handles import BlockRV, LoopRV
    from .sampling import Sampled
    if isinstance(value, (BlockRV, LoopRV, Sampled)):
        idx = index_of(value)
        if idx is None:
            derivation = getattr(value, "derivation", None)
            if derivation is not None:
                op, a, b = derivation
                return {"derived": [op, encode(a, index_of, where),
                                    encode(b, index_of, where)]}
            if isinstance(value, Sampled):
                return _plain(value)
            if isinstance(value, BlockRV):  # blocks are named: replayable as is
                return {"block": value.name}
            raise schedule_error(TraceError, where, f"{value!r} was not produced by this "
                                 "schedule; get handles from sch.get_block / "
                                 "sch.get_loops or the primitives' results")
        return {"rv": idx}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, E.IntImm):
        return value.value
    if isinstance(value, (list, tuple)):
        return [encode(v, index_of, where) for v in value]
    if isinstance(value, dict):
        return {"dict": {str(k): encode(v, index_of, where) for k, v in value.items()}}
    if isinstance(value, E.Expr):
        return {"expr": encode_expr(value, [])}
    if callable(value):
        return {"index_map": encode_index_map(value)}
    raise schedule_error(TraceError, where, f"cannot record the argument {value!r} "
                         f"({type(value).__name__}) in the trace; pass ints, strs, lists, "
                         "handles, expressions or a lambda over indices")


def _plain(v):
    for t in (int, float, str):
        if isinstance(v, t):
            return t(v)
    return v


def decode(value, values: dict, k: int):
    """Inverse of :func:`encode`; ``values`` maps trace indices to replayed handles.

    Example::

        >>> decode({"rv": 0}, {0: "handle"}, 0)
        'handle'
    """
    if isinstance(value, list):
        return [decode(v, values, k) for v in value]
    if isinstance(value, dict):
        if "rv" in value:
            if value["rv"] not in values:
                raise schedule_error(TraceError, "replay", f"instruction {k} refers to "
                                     f"value {value['rv']}, which no earlier instruction "
                                     "produced")
            return values[value["rv"]]
        if "derived" in value:
            from .sampling import derive
            op, a, b = value["derived"]
            return derive(op, decode(a, values, k), decode(b, values, k))
        if "block" in value:
            from .handles import BlockRV
            return BlockRV(value["block"])
        if "dict" in value:
            return {key: decode(v, values, k) for key, v in value["dict"].items()}
        if "expr" in value:
            return decode_expr(value["expr"], [])
        if "index_map" in value:
            return decode_index_map(value["index_map"])
        raise schedule_error(TraceError, "replay", f"instruction {k}: unknown value "
                             f"{value!r}")
    return value


def encode_expr(e, params: list, free: bool = False):
    """JSON form of an expression whose free variables are among ``params``; with
    ``free``, other variables are recorded by name (an index map's size variables, which
    replay binds to the function's variables of that name).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> encode_expr(i + 1, [i])
        {'node': 'Add', 'fields': [{'param': 0}, {'node': 'IntImm', 'fields': [1, 'int32']}]}
    """
    if isinstance(e, E.Var):
        for k, p in enumerate(params):
            if p is e:
                return {"param": k}
        if free:
            return {"free": e.name, "dtype": e.dtype, "size": isinstance(e, E.SizeVar)}
        raise schedule_error(TraceError, "trace", f"the expression uses the free variable "
                             f"{e.name!r}, which the trace cannot record")
    if isinstance(e, Buffer):
        raise schedule_error(TraceError, "trace", f"cannot record a reference to buffer "
                             f"{e.name!r} inside an expression")
    if isinstance(e, Node):
        return {"node": type(e).__name__,
                "fields": [encode_expr(getattr(e, f), params, free)
                           for f in field_names(type(e))]}
    if isinstance(e, tuple):
        return {"tuple": [encode_expr(v, params, free) for v in e]}
    return e


def decode_expr(d, params: list):
    """Inverse of :func:`encode_expr`, with ``params`` bound to the given expressions.

    Example::

        >>> import cuvil_tir as T
        >>> i, j = T.var("i"), T.var("j")
        >>> str(decode_expr(encode_expr(i * 2, [i]), [j]))
        'j * 2'
    """
    if isinstance(d, dict):
        if "param" in d:
            return params[d["param"]]
        if "free" in d:
            return (E.SizeVar if d.get("size") else E.Var)(d["free"], d["dtype"])
        if "tuple" in d:
            return tuple(decode_expr(v, params) for v in d["tuple"])
        cls = getattr(E, d["node"], None)
        if not (isinstance(cls, type) and issubclass(cls, E.Expr)):
            raise schedule_error(TraceError, "replay", f"unknown expression node "
                                 f"{d['node']!r}")
        return cls(*[decode_expr(v, params) for v in d["fields"]])
    return d


def encode_index_map(fn) -> dict:
    """JSON form of a lambda over buffer indices (as ``transform_layout`` takes).

    Example::

        >>> encode_index_map(lambda i, j: (j, i))["results"]
        [{'param': 1}, {'param': 0}]
    """
    from .primitives.index_maps import AXIS_SEPARATOR, call_index_map, index_names
    names = index_names(fn)
    if names is None:
        raise schedule_error(TraceError, "trace", f"cannot inspect the index map {fn!r}; "
                             "pass a lambda over the buffer's indices")
    for dt in ("int32", "int64"):      # int64: a map mixing in int64 size variables
        params = [E.Var(n, dt) for n in names]
        try:
            out = call_index_map(fn, params)
            break
        except DTypeError:
            if dt == "int64":
                raise
    is_tuple = isinstance(out, (list, tuple))
    results = [v if v is AXIS_SEPARATOR else E.as_expr(v, dt)
               for v in (out if is_tuple else [out])]
    return {"params": names, "tuple": is_tuple, **({"dtype": dt} if dt != "int32" else {}),
            "results": [{"axis_separator": True} if r is AXIS_SEPARATOR
                        else encode_expr(r, params, free=True) for r in results]}


def decode_index_map(d):
    """A Python function equivalent to the encoded index map.

    Example::

        >>> import cuvil_tir as T
        >>> fn = decode_index_map(encode_index_map(lambda i, j: (j, i)))
        >>> a, b = T.var("a"), T.var("b")
        >>> [v.name for v in fn(a, b)]
        ['b', 'a']
    """
    from .primitives.index_maps import AXIS_SEPARATOR, retype_index

    def index_map(*args):
        # rebuilt over stand-ins of the recorded dtype, then computed in the dtype of
        # the indices it is applied to (int64 buffers index in int64)
        dt = next((a.dtype for a in args if getattr(a, "dtype", "") == "int64"), "int32")
        rec = d.get("dtype", "int32")
        stand = [E.Var(n, rec) for n in d["params"]]
        vmap = {id(s): a for s, a in zip(stand, args)}
        vals = [AXIS_SEPARATOR if isinstance(r, dict) and r.get("axis_separator") else
                retype_index(decode_expr(r, stand), dt, vmap) for r in d["results"]]
        return tuple(vals) if d["tuple"] else vals[0]

    index_map.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in d["params"]])
    return index_map


def _result_prefix(name: str) -> str:
    from .primitive import PRIMITIVES
    fn = PRIMITIVES.get(name)
    return fn.spec.result_prefix() if hasattr(fn, "spec") else "v"


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
        return "lambda " + ", ".join(v["index_map"]["params"]) + ": ..."
    if isinstance(v, dict) and "dict" in v:    # a recorded dict argument (annotate)
        return "{" + ", ".join(f"{k!r}: {_py(x, names)}" for k, x in v["dict"].items()) + "}"
    return repr(v)
