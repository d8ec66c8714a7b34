"""Vendor HAL signatures: the emitted C calls the vendor's own API instead of Cuvil's.

Cuvil's HAL (:mod:`~targets.accel.hal`) has one fixed C signature per operation:
``<hal>_dma_load(dst, src, rows, row_bytes, dst_stride, src_stride)``, ``<hal>_push(src,
dst, id)``, one function per move and per intrinsic.  A vendor whose SDK already has
those calls under other names, argument orders, types and units declares them with
:class:`HalCall` (which Cuvil call it replaces) and :class:`HalArg` (each of its
parameters: which of Cuvil's arguments it carries, its C type, its unit, and for an
address whether it is a pointer, a byte offset in its memory or an element index), in
``Accelerator(..., hal_calls=[...])``.  Then:

- the header declares the vendor's functions (and the struct of a call that takes a
  descriptor, ``struct="..."``), and the kernel calls them with their signatures;
- the simulator implements each one by converting its arguments back (offsets to
  addresses, units to bytes) and running Cuvil's own: the same results and cycles;
- every emitted call is checked against the signature it uses (:class:`HalSignatureError`,
  CVL-E176): an address in a memory the call does not take, a value that is not a
  whole number of the declared unit, a constant that overflows the declared C type, an
  argument the vendor's call fixes (``fixed={"A_stride": 16}``) that has another value.

A Cuvil operation with no declared signature keeps Cuvil's call.  The operations and
their arguments are those of the generated header (:func:`cuvil_calls`,
``Accelerator.hal_ops``).

Example::

    >>> from targets.accel.examples.ascend_like import ascend
    >>> [c.name for c in ascend.hal_calls][:2]
    ['set_flag', 'wait_flag']
    >>> ascend.hal_ops["push"]
    [('int32_t', 'src'), ('int32_t', 'dst'), ('int32_t', 'id')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cuvil_tir import dtype as D
from cuvil_tir.arith import Analyzer
from cuvil_tir.expr import IntImm
from cuvil_tir.op import floordiv, floormod
from cuvil_tir.stmt import BufferRegion

from .errors import AccelLoweringError, DescriptionError
from .hal_words import BITS, HalWord, flat_args

#: the C types a vendor parameter may have, with the range of the integer ones
CTYPES = {"int8_t": (-(1 << 7), (1 << 7) - 1), "uint8_t": (0, (1 << 8) - 1),
          "int16_t": (-(1 << 15), (1 << 15) - 1), "uint16_t": (0, (1 << 16) - 1),
          "int32_t": (-(1 << 31), (1 << 31) - 1), "uint32_t": (0, (1 << 32) - 1),
          "int64_t": (-(1 << 63), (1 << 63) - 1), "uint64_t": (0, (1 << 64) - 1),
          "void *": None, "const void *": None}
ADDRESS = ("pointer", "bytes", "elements")


class HalSignatureError(AccelLoweringError):
    """An emitted call does not fit the vendor signature declared for it (module doc).

    Example::

        >>> HalSignatureError("x").code
        'CVL-E176'
    """

    code = "CVL-E176"


@dataclass(frozen=True)
class HalArg:
    """One parameter of a vendor call: its ``name``, the Cuvil argument it ``carries``
    (a parameter name of Cuvil's call, or an int: a constant only the vendor's API
    wants), its C type, the ``unit`` Cuvil's value is divided by (32: a count of
    32-byte blocks) and, for an address, ``address``: ``"pointer"``, ``"bytes"`` (byte
    offset from the start of its memory) or ``"elements"`` (element index there, for
    intrinsic operands).  ``minus``: another Cuvil argument subtracted first (a gap
    between rows where Cuvil passes a stride: ``carries="src_stride",
    minus="row_bytes"``); it must be carried by another parameter or fixed.
    ``symbols``: the vendor's names for the values it takes (``{"load": "PIPE_MTE2",
    0: "EVENT_ID0"}``: an engine of the accelerator by name, or a number); the kernel
    passes the name, the header defines it (unless the vendor's own header does), and a
    value with no name is refused when the call is emitted.

    Example::

        >>> HalArg("src_gap", "src_stride", "uint16_t", unit=32, minus="row_bytes").minus
        'row_bytes'
        >>> HalArg("pipe", "src", "uint8_t", symbols={"load": "PIPE_MTE2"}).symbols
        (('load', 'PIPE_MTE2'),)
    """

    name: str
    carries: str | int
    ctype: str = "int32_t"
    unit: int = 1
    address: str = "pointer"
    minus: str | None = None
    symbols: tuple = ()

    def __post_init__(self):
        if isinstance(self.symbols, dict):
            object.__setattr__(self, "symbols", tuple(self.symbols.items()))

    def symbol_values(self, acc) -> dict:
        """``{value Cuvil passes: the vendor's name}`` (engines by their index)."""
        return {acc.engines.index(k) if isinstance(k, str) else k: v
                for k, v in self.symbols}


@dataclass(frozen=True)
class HalCall:
    """A vendor function that ``replaces`` one of Cuvil's HAL calls (``"dma_load"``,
    ``"push"``, a move's or an intrinsic's C name: the keys of :func:`cuvil_calls`).
    ``args``: its parameters in order (:class:`HalArg`); ``memories``: the memory of
    each address it takes by offset (``{"dst": "asc.l1"}``; a move's and an
    intrinsic's are known); ``fixed``: Cuvil arguments the vendor call does not take
    because it assumes their value; ``struct``: pass the arguments as one descriptor
    of that C struct type, by pointer; ``returns``: ``"void"`` or ``"int32_t"``.
    ``then``: the vendor splits the operation in two calls (Gemmini's ``preload`` of
    the weights and accumulators, then ``compute_preloaded`` of the inputs): this call
    carries some of Cuvil's arguments, ``then`` (another HalCall replacing the same
    operation, itself maybe with a ``then``) the rest, and the kernel issues them one
    after the other for each of Cuvil's calls.  ``config``: a configuration call
    (Gemmini's ``config_ld`` of the DRAM stride) carrying some of the arguments as
    state the call then uses: issued once at the start of the kernel (once per core,
    after the switch to it, on a multi-core device) when every call passes it the same
    constants, otherwise before each call.  A parameter may pack several arguments as
    bit fields of one word (:class:`~targets.accel.hal_words.HalWord`).

    Example::

        >>> HalCall("set_flag", "push", (HalArg("pipe", "src"),), returns="void").name
        'set_flag'
        >>> pre = HalCall("preload", "matmul", (HalArg("b", "B"),),
        ...               then=HalCall("compute", "matmul", (HalArg("a", "A"),)))
        >>> [p.name for p in pre.parts()]
        ['preload', 'compute']
    """

    name: str
    replaces: str
    args: tuple
    memories: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    struct: str | None = None
    returns: str = "void"
    doc: str = ""
    then: object = None
    config: object = None

    def parts(self) -> list:
        """Its configuration call, this call and the calls it continues with
        (``then``), in order."""
        return ([self.config] if isinstance(self.config, HalCall) else []) + [self] + \
            (self.then.parts() if isinstance(self.then, HalCall) else [])

    def describe(self) -> dict:
        """The call as plain data (the compile cache's key)."""
        return {"name": self.name, "replaces": self.replaces, "struct": self.struct,
                "then": self.then.describe() if isinstance(self.then, HalCall) else None,
                "config": self.config.describe() if isinstance(self.config, HalCall)
                else None,
                "args": [a.describe() if isinstance(a, HalWord) else
                         (a.name, a.carries, a.ctype, a.unit, a.address, a.minus,
                          list(a.symbols)) for a in self.args],
                "memories": sorted(self.memories.items()), "returns": self.returns,
                "fixed": sorted(self.fixed.items())}


def cuvil_calls(acc, header_text: str) -> dict:
    """``{operation: [(C type, parameter)]}``: Cuvil's HAL calls of ``acc`` read from
    ``header_text``, its generated header without the vendor's calls (so never out of
    step with it; ``Accelerator.hal_ops`` holds them)."""
    out = {}
    for m in re.finditer(rf"^int32_t {acc.hal}_(\w+)\((.*)\);$", header_text, re.M):
        params = [] if m.group(2) == "void" else m.group(2).split(", ")
        out[m.group(1)] = [(p[:len(p) - len(n)].strip(), n) for p in params
                           for n in [re.search(r"\w+$", p).group(0)]]
    out.pop("scratch", None)
    return out


def _intrinsic_of_op(acc, op):
    """The intrinsic whose HAL operation is ``op`` (with its init flag or not)."""
    return next((it for it in acc.intrinsics if op in (
        it.c_name, f"{it.c_name}_init" if it.init else None)), None)


def _implied_memories(acc, op) -> dict:
    """The memory of each address parameter the operation itself names."""
    mv = acc.move_of.get(f"{acc.hal}_{op}")
    if mv is not None:
        return {"dst": mv.dst, "src": mv.src}
    it = _intrinsic_of_op(acc, op)
    return dict(it.operands) if it is not None else {}


def check_hal_calls(acc, calls) -> tuple:
    """Validate the declared vendor calls against ``acc``'s own (DescriptionError)."""
    where = f"Accelerator {acc.name!r}"
    ours, seen, structs = acc.hal_ops, set(), {}
    for head in calls:
        if not isinstance(head, HalCall):
            raise DescriptionError(f"{where}: hal_calls takes HalCall(...) entries, found "
                                   f"{head!r}")
        parts = head.parts()
        if any(x is not None and not isinstance(x, HalCall) for x in (head.then, head.config)) \
                or any(p.replaces != head.replaces for p in parts) or \
                isinstance(head.config, HalCall) and (head.config.config or head.config.then):
            raise DescriptionError(f"{where}: vendor call {head.name!r}: then= continues it "
                                   f"and config= configures it with another HalCall "
                                   f"replacing {head.replaces!r} too (a configuration "
                                   "call without its own config= or then=)")
        _check_parts(where, head, parts, ours, seen, structs, acc)
    return tuple(calls)


def _check_parts(where, head, parts, ours, seen, structs, acc) -> None:
    """The checks of one vendor call and the calls it continues with."""
    carried, fixed = [], {}
    for c in parts:
        at = f"{where}: vendor call {c.name!r}"
        if not re.fullmatch(r"[A-Za-z_]\w*", c.name) or c.name.startswith(f"{acc.hal}_") \
                or c.name in seen:
            raise DescriptionError(f"{at}: the name must be a C identifier, not starting with "
                                   f"'{acc.hal}_' (Cuvil's own calls) and not used twice")
        seen.add(c.name)
        if c.replaces not in ours:
            raise DescriptionError(f"{at} replaces {c.replaces!r}, which is no HAL call of "
                                   f"this accelerator; its calls: {sorted(ours)}")
        if c.struct is not None and not re.fullmatch(r"[A-Za-z_]\w*", str(c.struct)):
            raise DescriptionError(f"{at}: struct must be a C type name, found {c.struct!r}")
        if c.returns not in ("void", "int32_t"):
            raise DescriptionError(f"{at}: returns must be 'void' or 'int32_t', found "
                                   f"{c.returns!r}")
        params = dict((n, t) for t, n in ours[c.replaces])
        bad = {p: m for p, m in dict(c.memories).items()
               if "*" not in params.get(p, "") or m not in acc.scopes}
        if bad:
            raise DescriptionError(f"{at}: memories= maps {bad}; it maps address parameters "
                                   f"of {c.replaces} ({[n for n in params if '*' in params[n]]})"
                                   f" to accelerator memories ({sorted(acc.scopes)})")
        mems = {**_implied_memories(acc, c.replaces), **c.memories}
        if not all(isinstance(a, (HalArg, HalWord)) for a in c.args) or \
                c.struct and any(isinstance(a, HalWord) for a in c.args):
            raise DescriptionError(f"{at}: args takes HalArg(...) or HalWord(...) entries "
                                   f"(no HalWord in a struct), found {list(c.args)!r}")
        carried += [a.carries for a in flat_args(c) if isinstance(a.carries, str)]
        fixed.update(c.fixed)
        for a in flat_args(c):
            _check_arg(at, a, params, mems, acc, c.replaces)
        fields = [(a.name, a.ctype) for a in c.args]
        if c.struct is not None and structs.setdefault(c.struct, fields) != fields:
            raise DescriptionError(f"{at}: struct {c.struct!r} is declared by another call with "
                                   f"other fields ({structs[c.struct]}); calls sharing a "
                                   "descriptor list the same fields in the same order")
        bad = [n for n, v in c.fixed.items() if "*" in params.get(n, "") or
               isinstance(v, bool) or not isinstance(v, int)]
        if bad:
            raise DescriptionError(f"{at}: fixed= gives {bad} a value that is not an int, or "
                                   "fixes an address; only numbers can be fixed")
        plain = {a.carries for a in flat_args(c)
                 if isinstance(a.carries, str) and a.minus is None}
        for a in flat_args(c):
            if a.minus is not None and (a.address != "pointer" or "*" in a.ctype or
                                        a.minus not in plain | set(c.fixed) or
                                        "*" in params[a.minus]):
                raise DescriptionError(
                    f"{at}: parameter {a.name!r} subtracts {a.minus!r}: minus= names a "
                    "number Cuvil passes that another parameter of the same call carries "
                    "as it is (or fixed=), and applies to numbers, not addresses")
    at = f"{where}: vendor call {head.name!r}" + (" (with its then= calls)"
                                                   if len(parts) > 1 else "")
    missing = [n for n in params if n not in carried and n not in fixed]
    twice = sorted({n for n in carried if carried.count(n) > 1})
    if missing or twice or any(n not in params for n in fixed):
        raise DescriptionError(
            f"{at}: every argument of Cuvil's {head.replaces}({', '.join(params)}) must be "
            f"carried by one HalArg or named in fixed= (missing: {missing}, carried twice: "
            f"{twice}, fixed but unknown: {sorted(set(fixed) - set(params))})")


def _check_arg(at, a, params, mems, acc, op) -> None:
    if a.ctype not in CTYPES:
        raise DescriptionError(f"{at}: parameter {a.name!r} has C type {a.ctype!r}; one of "
                               f"{sorted(CTYPES)}")
    if isinstance(a.carries, bool) or not isinstance(a.carries, (str, int)) or \
            isinstance(a.carries, str) and a.carries not in params:
        raise DescriptionError(f"{at}: parameter {a.name!r} carries {a.carries!r}: name one "
                               f"of {list(params)} or give an int constant")
    if isinstance(a.unit, bool) or not isinstance(a.unit, int) or a.unit < 1 or \
            a.address not in ADDRESS:
        raise DescriptionError(f"{at}: parameter {a.name!r}: unit must be a positive int and "
                               f"address one of {ADDRESS}, found {a.unit!r}, {a.address!r}")
    pointer = isinstance(a.carries, str) and "*" in params[a.carries]
    if a.address == "pointer" and pointer != ("*" in a.ctype):
        raise DescriptionError(f"{at}: parameter {a.name!r} carries {a.carries!r}; a pointer "
                               "is passed as a pointer type or with address='bytes'/'elements', "
                               "a number as an integer type")
    _check_symbols(at, a, pointer, acc)
    if a.address == "pointer":
        return
    mem = mems.get(a.carries) if pointer else None
    operand = _intrinsic_of_op(acc, op) is not None and a.carries in mems
    if mem not in acc.scopes or "*" in a.ctype or a.address == "elements" and not operand:
        raise DescriptionError(
            f"{at}: parameter {a.name!r} passes {a.carries!r} as {a.address} in its memory: it "
            f"must be an address in an accelerator memory (name it in memories=, found "
            f"{mem!r}), of an integer C type, and 'elements' only for an intrinsic's operand")


def _check_symbols(at, a, pointer, acc) -> None:
    keys = [k for k, _ in a.symbols]
    names = [v for _, v in a.symbols]
    bad = [k for k in keys if isinstance(k, bool) or not isinstance(k, (int, str)) or
           isinstance(k, str) and k not in acc.engines]
    bad += [v for v in names if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z_]\w*", v)]
    if a.symbols and (bad or pointer or a.address != "pointer" or
                      len(set(names)) < len(names) or len(set(keys)) < len(keys)):
        raise DescriptionError(
            f"{at}: parameter {a.name!r}: symbols= maps numbers it takes (ints, or engine "
            f"names of this accelerator: {list(acc.engines)}) to distinct C identifiers, "
            f"and only for a number; found {dict(a.symbols)!r}")


def symbol_defines(acc) -> list:
    """``#define`` lines for the vendor's value names (each once, unless its header
    has it)."""
    out, seen = [], set()
    for c in (p for head in acc.hal_calls for p in head.parts()):
        for a in flat_args(c):
            for value, name in a.symbol_values(acc).items():
                if name not in seen:
                    seen.add(name)
                    out += [f"#ifndef {name}", f"#define {name} {value // a.unit}", "#endif"]
    return out


def _item(acc, op, param) -> int:
    it = _intrinsic_of_op(acc, op)
    p = next(p for p in it.desc.params if p.name == param)
    return D.itemsize(p.dtype)


def vendor_header(acc) -> list:
    """The declarations of the vendor calls (and their descriptor structs, and the
    names of the values they take)."""
    out, structs = symbol_defines(acc), set()
    for c in (p for head in acc.hal_calls for p in head.parts()):
        params = [f"{a.ctype}{'' if a.ctype.endswith('*') else ' '}{a.name}" for a in c.args]
        out.append(f"/* the vendor's {c.name}: Cuvil's {c.replaces}"
                   + (f"; {c.doc}" if c.doc else "") + " */")
        if c.struct:
            if c.struct not in structs:
                out.append(f"typedef struct {{ {'; '.join(params)}; }} {c.struct};")
            structs.add(c.struct)
            params = [f"const {c.struct} *d"]
        out.append(f"{c.returns} {c.name}({', '.join(params)});")
    return out


def _params(c) -> str:
    return (f"const {c.struct} *d" if c.struct else
            ", ".join(f"{a.ctype}{'' if a.ctype.endswith('*') else ' '}{a.name}"
                      for a in c.args))


def vendor_sim(acc) -> str:
    """The simulator's vendor calls: each converts its arguments back to Cuvil's and
    runs Cuvil's call (a call split in parts: the first ones keep their arguments, the
    last runs it)."""
    ours, out, held = acc.hal_ops, [], []
    nc = acc.cores.count if acc.cores is not None else 1
    mem_index = {m.scope: k for k, m in enumerate(acc.memories_only)}
    for head in acc.hal_calls:
        parts, last = head.parts(), head.parts()[-1]
        mems, fixed, ref, by_param = _implied_memories(acc, head.replaces), {}, {}, {}
        for c in parts:
            mems.update(c.memories)
            fixed.update(c.fixed)
            for a in c.args:
                at = "d->" if c.struct else ""
                # by parameter object: two parts may name parameters alike
                ref[id(a)] = f"{at}{a.name}" if c is last else \
                    f"cvl_hold_{c.name}_{a.name}[cvl_core]"
                if isinstance(a, HalWord):
                    ref.update(zip(map(id, (f for f, _, _ in a.fields)), a.unpack(ref[id(a)])))
            by_param.update({a.carries: a for a in flat_args(c) if isinstance(a.carries, str)})
            if c is not last:
                # what a configuration call sets is the state of the core it ran on
                out += [f"static {a.ctype}{'' if a.ctype.endswith('*') else ' '}"
                        f"cvl_hold_{c.name}_{a.name}[{nc}];" for a in c.args]
                out.append(f"static int cvl_held_{c.name}[{nc}];")
                held.append(c.name)
                keep = " ".join(f"cvl_hold_{c.name}_{a.name}[cvl_core] = "
                                f"{'d->' if c.struct else ''}{a.name};" for a in c.args)
                keep += f" cvl_held_{c.name}[cvl_core] = 1;"
                out.append(f"{c.returns} {c.name}({_params(c)}) {{ {keep}"
                           + (" return 0;" if c.returns != "void" else "") + " }")
        cval = {}
        for ctype, p in ours[head.replaces]:
            a = by_param.get(p)
            if p in fixed:
                cval[p] = f"({ctype}){fixed[p]}"
            elif a.address == "pointer" and "*" in ctype:
                cval[p] = f"({ctype}){ref[id(a)]}"
            else:
                v = f"((int64_t){ref[id(a)]} * {a.unit})"
                if a.address == "elements":
                    v = f"({v} * {_item(acc, head.replaces, p)})"
                if a.address != "pointer":
                    v = f"({acc.hal}_scratch({mem_index[mems[p]]}) + {v})"
                cval[p] = f"({ctype}){v}"
        for ctype, p in ours[head.replaces]:      # a gap back to a stride
            a = by_param.get(p)
            if a is not None and a.minus is not None:
                cval[p] = f"({ctype})((int64_t){ref[id(a)]} * {a.unit} + {cval[a.minus]})"
        back = [cval[p] for _, p in ours[head.replaces]]
        call = f"{acc.hal}_{head.replaces}({', '.join(back)})"
        body = f"(void){call};" if last.returns == "void" else f"return {call};"
        check = "".join(f"if (!cvl_held_{c.name}[cvl_core]) cvl_sim_stats.error = 5; "
                        for c in parts if c is not last)
        out.append(f"{last.returns} {last.name}({_params(last)}) {{ {check}{body} }}")
    resets = " ".join(f"memset(cvl_held_{n}, 0, sizeof cvl_held_{n});" for n in held)
    out.append(f"static void cvl_vendor_reset(void) {{ {resets} }}")
    return "\n".join(out) + "\n"


def _range(printer):
    ana = Analyzer()
    for v, (lo, hi) in printer.loop_bounds.items():
        ana.update_bound(v, (lo, hi))
    return ana


def _value(printer, c, a, arg, mems, ana):
    """The IR value the vendor parameter ``a`` gets for Cuvil's argument ``arg``."""
    if not isinstance(arg, BufferRegion):
        return arg
    buf, want = arg.buffer, mems.get(a.carries)
    if buf.scope != want:
        raise HalSignatureError(
            f"vendor call {c.name!r} ({c.replaces}) takes {a.carries!r} as a {a.address} "
            f"offset in memory {want!r}, but this call's {a.carries!r} is buffer "
            f"{buf.name!r} in {buf.scope!r}; declare another HalCall for {c.replaces} with "
            f"memories={{{a.carries!r}: {buf.scope!r}}}, or pass it as a pointer")
    flat = None
    for r, st in zip(arg.region, buf.default_strides()):
        flat = r.min * st if flat is None else flat + r.min * st
    item = D.itemsize(buf.dtype)
    base = printer.addr[buf.name][1]
    if a.address == "bytes":
        return IntImm(base, "int32") + flat * item
    return IntImm(base // item, "int32") + flat


def _fit(c, a, v, ana, what):
    """``v`` over ``a.unit``, checked to be whole and in range of ``a.ctype``."""
    where = f"vendor call {c.name!r} ({c.replaces}): parameter {a.name!r} ({what})"
    if a.unit > 1:
        if not ana.can_prove(floormod(v, a.unit) == 0):
            raise HalSignatureError(
                f"{where} is {v}, not a whole number of its unit of {a.unit}; make the tile "
                f"rows/offsets multiples of {a.unit} or declare a smaller unit")
        v = ana.simplify(floordiv(v, a.unit))
    lim = CTYPES[a.ctype]
    if lim is not None:
        lo, hi = ana.const_int_bound(v)
        if lo < lim[0] or hi > lim[1]:
            raise HalSignatureError(
                f"{where} ranges over [{lo}, {hi}], beyond {a.ctype} [{lim[0]}, {lim[1]}]; "
                "use smaller tiles or declare a wider C type")
    return v


def _runtime_offset(printer, a, r) -> str:
    """The offset of a region of a buffer with no planned address (a parameter, as in
    an intrinsic's own implementation), computed at run time from its pointer."""
    acc = printer.acc
    k = [m.scope for m in acc.memories_only].index(r.buffer.scope)
    ptr = f"(const uint8_t *){printer.extern_arg(r)}"
    off = f"({ptr} - {acc.hal}_scratch({k}))"
    if a.address == "elements":
        off = f"({off} / {D.itemsize(r.buffer.dtype)})"
    return f"({a.ctype})({off} / {a.unit})" if a.unit > 1 else f"({a.ctype}){off}"


def _symbol(c, a, v, acc) -> str:
    """The vendor's name of the value ``v`` of parameter ``a``."""
    names = {k // a.unit: n for k, n in a.symbol_values(acc).items()}
    if not isinstance(v, IntImm) or v.value not in names:
        raise HalSignatureError(
            f"vendor call {c.name!r} ({c.replaces}): parameter {a.name!r} is {v}, which "
            f"has no name in its symbols= ({sorted(names)} are named); name every value "
            "it can take")
    return names[v.value]


def print_vendor_call(printer, c, e) -> str:
    """The C of Cuvil's call ``e`` as the vendor's ``c`` (HalSignatureError when it does
    not fit); a call in parts (``then``) is their comma expression, in order."""
    hoisted = getattr(printer, "hoisted", {})
    parts = [_print_part(printer, p, e) for p in c.parts() if p.name not in hoisted]
    return parts[0] if len(parts) == 1 else f"({', '.join(parts)})"


def hoisted_configs(acc, calls) -> dict:
    """``{configuration call name: a call it configures}`` for the configuration calls
    that every one of ``calls`` (the kernel's Cuvil calls, in order) it configures
    passes the same constants: those are issued once, at the start, and on a device
    with cores once per core, after the switch to it (each core has its own
    configuration: :mod:`~targets.accel.codegen`)."""
    if not acc.hal_calls:
        return {}
    values, first = {}, {}
    for e in calls:
        c = pick_vendor_call(acc, e)
        if c is None or not isinstance(c.config, HalCall):
            continue
        given = dict(zip([n for _, n in acc.hal_ops[c.replaces]], e.args[2:]))
        vals = tuple(given[a.carries] for a in flat_args(c.config)
                     if isinstance(a.carries, str))
        key = tuple(v.value for v in vals) if all(isinstance(v, IntImm) for v in vals) \
            else None
        values.setdefault(c.config.name, set()).add(key)
        first.setdefault(c.config.name, e)
    return {n: first[n] for n, v in values.items() if len(v) == 1 and None not in v}


def print_hoisted(printer, name, e) -> str:
    """The configuration call ``name`` as ``e``'s vendor call passes it."""
    c = pick_vendor_call(printer.acc, e)
    return _print_part(printer, c.config, e)


def _print_part(printer, c, e) -> str:
    acc = printer.acc
    ours = [n for _, n in acc.hal_ops[c.replaces]]
    given = dict(zip(ours, e.args[2:]))
    mems = {**_implied_memories(acc, c.replaces), **c.memories}
    ana = _range(printer)
    for p, want in c.fixed.items():
        v = given[p]
        if not ana.can_prove(v == want):
            raise HalSignatureError(
                f"vendor call {c.name!r} ({c.replaces}) assumes {p} = {want}, but this call "
                f"passes {v}; carry {p!r} with a HalArg, or schedule so that it is {want}")
    texts = [a.pack([_text(printer, c, f, n, given, mems, ana) for f, _, n in a.fields])
             if isinstance(a, HalWord) else _text(printer, c, a, None, given, mems, ana)
             for a in c.args]
    if c.struct:
        fields = ", ".join(f".{a.name} = {t}" for a, t in zip(c.args, texts))
        return f"{c.name}(&({c.struct}){{{fields}}})"
    return f"{c.name}({', '.join(texts)})"


def _text(printer, c, a, width, given, mems, ana) -> str:
    """The C of parameter ``a`` (a field of ``width`` bits of a word, or None)."""
    if isinstance(a.carries, int):
        return str(a.carries)
    if a.address == "pointer" and "*" in a.ctype:
        return printer.extern_arg(given[a.carries])
    if isinstance(given[a.carries], BufferRegion) and \
            given[a.carries].buffer.name not in printer.addr:
        return _runtime_offset(printer, a, given[a.carries])
    v = _value(printer, c, a, given[a.carries], mems, ana)
    if a.minus is not None:
        v = v - given[a.minus]
    what = a.carries if a.minus is None else f"{a.carries} - {a.minus}"
    v = _fit(c, a, ana.simplify(v), ana, what)
    lo, hi = ana.const_int_bound(v)
    if width is not None and width < BITS[a.ctype] and (lo < 0 or hi >= 1 << width):
        raise HalSignatureError(
            f"vendor call {c.name!r} ({c.replaces}): field {a.name!r} ({what}) ranges over "
            f"[{lo}, {hi}], beyond its {width} bits [0, {(1 << width) - 1}]; use smaller "
            "tiles or declare a wider field")
    return _symbol(c, a, v, printer.acc) if a.symbols else printer.bare(v)


def pick_vendor_call(acc, e):
    """The vendor call that replaces Cuvil's call ``e``: the first declared for its
    operation whose memories match the call's addresses (None: keep Cuvil's)."""
    name = e.args[0].value
    op = name[len(acc.hal) + 1:]
    cands = [c for c in acc.hal_calls if c.replaces == op]
    if not name.startswith(f"{acc.hal}_") or not cands:
        return None
    ours = [n for _, n in acc.hal_ops[op]]
    given = dict(zip(ours, e.args[2:]))
    for c in cands:
        if all(not isinstance(given.get(p), BufferRegion) or given[p].buffer.scope == m
               for p, m in c.memories.items()):
            return c
    return cands[0]
