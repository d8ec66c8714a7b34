"""``tvm.tir.schedule.{Instruction, InstructionKind, Trace}`` over Cuvil's trace.

TVM's instruction layout (a kind in CamelCase, handle ``inputs``, positional ``attrs``)
is translated per kind into Cuvil's (primitive name, positional args, keyword attrs),
and back for printing and TVM's JSON list form.  Numbering, dead-code removal,
post-processing cut and replay are Cuvil's (``schedules.Trace``); this module only
renames and reorders.  A kind without a form here raises :class:`ShimGap`.
"""

from __future__ import annotations

import json
import re
import weakref

import cuvil_tir as T
import schedules as S
from cuvil_tir.expr import FloatImm, IntImm
from schedules.primitive import PRIMITIVES

from ..._gap import ShimGap

REQUIRED = object()


class _Form:
    """TVM's argument layout of one kind: input names (``*name`` takes the rest),
    attribute names with TVM's defaults, and the TVM names giving Cuvil's arguments."""

    def __init__(self, inputs, attrs, cuvil):
        self.inputs, self.attrs, self.cuvil = inputs, attrs, cuvil


FORMS = {
    "GetBlock": _Form([], [("name", REQUIRED), ("func_name", "main")], ["name"]),
    "GetLoops": _Form(["block"], [], ["block"]),
    "ComputeInline": _Form(["block"], [], ["block"]),
    "ReverseComputeInline": _Form(["block"], [], ["block"]),
    "Split": _Form(["loop", "*factors"], [("preserve_unit_iters", True),
                                         ("disable_predication", False)],
                   ["loop", "factors"]),
    "Fuse": _Form(["*loops"], [("preserve_unit_iters", True)], ["*loops"]),
    "Reorder": _Form(["*ordered_loops"], [], ["*ordered_loops"]),
    "Annotate": _Form(["block_or_loop", "ann_val"], [("ann_key", REQUIRED)],
                      ["block_or_loop", "ann_key", "ann_val"]),
    "EnterPostproc": _Form([], [], []),
    "SampleCategorical": _Form([], [("candidates", REQUIRED), ("probs", REQUIRED)],
                               ["candidates", "probs"]),
    "SampleComputeLocation": _Form(["block"], [], ["block"]),
    "SamplePerfectTile": _Form(["loop"], [("n", REQUIRED), ("max_innermost_factor", 16)],
                               ["loop", "n", "max_innermost_factor"]),
}


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


class InstructionKind:
    """``InstructionKind.get(name)``: TVM's kind name over a Cuvil primitive."""

    _kinds: dict = {}

    def __init__(self, name):
        self.name = name
        self.primitive = _snake(name)
        if self.primitive not in PRIMITIVES:
            from .schedule import MissingPrimitive
            raise MissingPrimitive(f"InstructionKind {name!r}: Cuvil has no primitive "
                                   f"{self.primitive!r}")

    @classmethod
    def get(cls, name: str) -> "InstructionKind":
        if name not in cls._kinds:
            cls._kinds[name] = cls(name)
        return cls._kinds[name]

    @property
    def is_pure(self) -> bool:
        return PRIMITIVES[self.primitive].spec.pure

    def same_as(self, other) -> bool:
        return self is other


def _form(kind: str) -> _Form:
    if kind not in FORMS:
        raise ShimGap(f"trace instruction kind {kind!r}: no argument form in the shim")
    return FORMS[kind]


def _plain(v):
    """A TVM attribute / input value as Cuvil takes it."""
    if isinstance(v, IntImm):
        return bool(v.value) if v.dtype == "bool" else v.value
    if isinstance(v, FloatImm):
        return v.value
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


class Instruction:
    """``tir.schedule.Instruction(kind, inputs, attrs, outputs)``."""

    def __init__(self, kind, inputs, attrs, outputs):
        self.kind, self.inputs, self.attrs, self.outputs = kind, list(inputs), list(attrs), \
            list(outputs)

    def same_as(self, other) -> bool:
        return self is other

    def _cuvil(self, decision=None) -> S.Instruction:
        form = _form(self.kind.name)
        named = _bind(form, self.inputs, self.attrs)
        args = []
        for n in form.cuvil:
            args.extend(named[n[1:]] if n.startswith("*") else [named[n]])
        return S.Instruction(self.kind.primitive, [_plain(a) for a in args], {},
                             list(self.outputs), _plain(decision))

    def __str__(self) -> str:
        ins = [_Name("_") if _is_handle(v) else v for v in self.inputs]
        outs = ["_"] * len(self.outputs)
        many = PRIMITIVES[self.kind.primitive].spec.returns.many
        return _line(self.kind.name, ins, [_plain(a) for a in self.attrs], outs, many, None)


def _bind(form: _Form, inputs, attrs) -> dict:
    named = {}
    for k, n in enumerate(form.inputs):
        if n.startswith("*"):
            named[n[1:]] = list(inputs[k:])
            break
        named[n] = inputs[k]
    for (n, default), v in zip(form.attrs, attrs):
        v = _plain(v)
        if default is not REQUIRED and n not in form.cuvil and v != default:
            raise ShimGap(f"instruction attribute {n}={v!r}: no Cuvil counterpart")
        named[n] = v
    return named


def _is_handle(v) -> bool:
    return isinstance(v, (S.BlockRV, S.LoopRV, T.Var))


class _View(Instruction):
    """A Cuvil instruction seen in TVM's form (one per Cuvil instruction)."""

    _of: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    def __init__(self, inst: S.Instruction):
        self.cuvil = inst

    @classmethod
    def of(cls, inst: S.Instruction) -> "_View":
        if inst not in cls._of:
            cls._of[inst] = cls(inst)
        return cls._of[inst]

    # read on use: a kind without a form fails the case that looks at it, not the trace
    kind = property(lambda self: InstructionKind.get(_camel(self.cuvil.name)))
    inputs = property(lambda self: _tvm_args(self.cuvil, {})[0])
    attrs = property(lambda self: _tvm_args(self.cuvil, {})[1])
    outputs = property(lambda self: list(self.cuvil.outputs))

    def _cuvil(self, decision=None) -> S.Instruction:
        return self.cuvil


def _tvm_args(inst: S.Instruction, names: dict):
    """TVM's (inputs, attrs) of a Cuvil instruction; handles by their printed names."""
    kind = _camel(inst.name)
    form = _form(kind)
    vals = [_render_value(v, names) for v in inst.inputs]
    given = {}
    k = 0
    for n in form.cuvil:
        if n.startswith("*"):
            given[n[1:]] = vals[k:]
            k = len(vals)
        elif k < len(vals):
            given[n] = vals[k]
            k += 1
    given.update({key: _render_value(v, names) for key, v in inst.attrs.items()})
    inputs = []
    for n in form.inputs:
        if n.startswith("*"):
            inputs.extend(given.get(n[1:], []))
        else:
            inputs.append(given[n])
    attrs = [given.get(n, default) for n, default in form.attrs]
    return inputs, attrs


class _Name(str):
    """A handle's printed name (``b0``), distinct from a string value."""


def _render_value(v, names):
    if isinstance(v, dict) and "rv" in v:
        return _Name(names.get(v["rv"], "_"))
    if isinstance(v, dict) and "block" in v:
        return v["block"]
    if isinstance(v, list):
        return [_render_value(x, names) for x in v]
    return v


def _py(v) -> str:
    """A value as TVM's trace printer writes it."""
    if isinstance(v, _Name):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_py(x) for x in v) + "]"
    return str(v)


def _line(kind, inputs, attrs, outs, many, decision) -> str:
    form = _form(kind)
    named = _bind(form, inputs, attrs)
    args = []
    for n in form.inputs + [a for a, _ in form.attrs]:
        key = n.lstrip("*")
        if n.startswith("*") and kind in ("Fuse", "Reorder"):
            args.extend(_py(x) for x in named[key])
            continue
        args.append(f"{key}={_py(named[key])}")
    if decision is not None:
        args.append(f"decision={_py(decision)}")
    call = f"sch.{_snake(kind)}({', '.join(args)})"
    if not outs:
        return call
    target = ", ".join(outs) + ("," if many and len(outs) == 1 else "")
    return f"{target} = {call}"


def _tvm_decision(d):
    if isinstance(d, list):
        return [_TvmInt(x) for x in d]
    return _TvmInt(d) if isinstance(d, int) else d


class _TvmInt(int):
    """A decision as TVM hands it out (an ``IntImm``: ``.value``)."""

    @property
    def value(self) -> int:
        return int(self)


class Trace:
    """``tir.schedule.Trace(insts, decisions)``: TVM's mutable trace over Cuvil's."""

    def __init__(self, insts=(), decisions=None):
        self._items = list(insts)
        self._decisions = dict(decisions or {})

    @classmethod
    def of(cls, trace: S.Trace) -> "Trace":
        return cls([_View.of(i) for i in trace.insts])

    def _cuvil(self) -> S.Trace:
        return S.Trace([it._cuvil(self._decisions.get(it)) for it in self._items])

    @property
    def insts(self) -> list:
        return list(self._items)

    @property
    def decisions(self) -> dict:
        cuvil = self._cuvil()
        return {it: _tvm_decision(ci.decision) for it, ci in zip(self._items, cuvil.insts)
                if ci.decision is not None}

    def get_decision(self, inst):
        return self.decisions.get(inst)

    def append(self, inst, decision=None) -> None:
        self._items.append(inst)
        if decision is not None:
            self._decisions[inst] = decision

    def pop(self):
        return self._items.pop() if self._items else None

    def as_python(self, remove_postproc: bool = False) -> list:
        trace = self._cuvil()
        if remove_postproc:
            trace = trace.before_postproc()
        names: dict = {}
        lines = []
        for inst in trace:
            returns = PRIMITIVES[inst.name].spec.returns
            inputs, attrs = _tvm_args(inst, names)
            outs = []
            for idx in inst.outputs:
                names[idx] = f"{returns.prefix}{idx}"
                outs.append(names[idx])
            lines.append(_line(_camel(inst.name), inputs, attrs, outs, returns.many,
                               inst.decision))
        return lines

    def __str__(self) -> str:
        body = ["  " + line for line in self.as_python()] or ["  pass"]
        return "\n".join(["# from tvm import tir",
                          "def apply_trace(sch: tir.Schedule) -> None:"] + body)

    __repr__ = __str__

    def as_json(self, remove_postproc: bool = False) -> list:
        trace = self._cuvil()
        if remove_postproc:
            trace = trace.before_postproc()
        names: dict = {}
        insts, decisions = [], []
        for k, inst in enumerate(trace):
            prefix = PRIMITIVES[inst.name].spec.returns.prefix
            inputs, attrs = _tvm_args(inst, names)
            outs = []
            for idx in inst.outputs:
                names[idx] = f"{prefix}{idx}"
                outs.append(names[idx])
            insts.append([_camel(inst.name), [_json_input(v) for v in inputs],
                          [_tvm_attr(a) for a in attrs], outs])
            if inst.decision is not None:
                decisions.append([k, inst.decision])
        return [insts, decisions]

    @staticmethod
    def apply_json_to_schedule(json_obj, sch) -> None:
        insts, decisions = json_obj
        decided = dict((k, d) for k, d in decisions)
        handles: dict = {}
        items = []
        for k, (kind, inputs, attrs, outs) in enumerate(insts):
            ins = [_from_json_input(v, handles) for v in inputs]
            fresh = [_fresh(name, handles) for name in outs]
            items.append(Instruction(InstructionKind.get(kind), ins, attrs, fresh)
                         ._cuvil(decided.get(k)))
        S.Trace(items).apply_to(sch._sch)

    def apply_to_schedule(self, sch, remove_postproc: bool, decision_provider=None) -> None:
        if decision_provider is not None:
            raise ShimGap("Trace.apply_to_schedule(decision_provider=...): no Cuvil "
                          "counterpart")
        self._cuvil().apply_to(sch._sch, remove_postproc=remove_postproc)

    def simplified(self, remove_postproc: bool) -> "Trace":
        return Trace.of(self._cuvil().simplified(remove_postproc=remove_postproc))

    def with_decision(self, inst, decision, remove_postproc: bool) -> "Trace":
        k = self._items.index(inst)
        trace = self._cuvil().with_decisions({k: _plain(decision)})
        if remove_postproc:
            trace = trace.simplified(remove_postproc=True)
        return Trace.of(trace)


def _json_input(v):
    # TVM's JSON tells a handle's name from a string value by quoting the value
    if isinstance(v, _Name):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    return v


def _from_json_input(v, handles):
    if isinstance(v, str):
        return json.loads(v) if v.startswith('"') else handles[v]
    return v


def _fresh(name: str, handles: dict):
    handles[name] = {"b": S.BlockRV, "l": S.LoopRV}.get(name[0], lambda: T.var(name))()
    return handles[name]


def _tvm_attr(v):
    if isinstance(v, bool) or isinstance(v, str) or v is None:
        return v
    if isinstance(v, int):
        return IntImm(v, "int32")
    if isinstance(v, float):
        return FloatImm(v, "float32")
    if isinstance(v, list):
        return [_tvm_attr(x) for x in v]
    return v
