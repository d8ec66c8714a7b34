"""How a trace records primitive arguments: handles as trace indices, everything else
as JSON values (expressions and index maps as node trees), and back.

``encode`` is the one writer and ``decode`` the one reader; :func:`map_rvs` walks an
encoded value's handle references (renumbering, liveness).

Example::

    >>> encode([None, 4], lambda rv: None, "split")
    [None, 4]
    >>> map_rvs([{"rv": 3}, {"derived": ["add", {"rv": 1}, 2]}], lambda k: k + 10)
    [{'rv': 13}, {'derived': ['add', {'rv': 11}, 2]}]
"""

from __future__ import annotations

import inspect

import cuvil_tir.expr as E
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import DTypeError
from cuvil_tir.node import Node, field_names

from .errors import TraceError, schedule_error
from .handles import BlockRV, LoopRV
from .sampling import Sampled, derive
from .primitives.index_maps import AXIS_SEPARATOR, call_index_map, index_names, retype_index


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
            if isinstance(value, BlockRV) and value.name is not None:
                return {"block": value.name}   # blocks are named: replayable as is
            raise schedule_error(TraceError, where, f"{value!r} was not produced by this "
                                 "schedule (nor by an earlier instruction of the trace); "
                                 "get handles from sch.get_block / sch.get_loops or the "
                                 "primitives' results")
        return {"rv": idx}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, E.Var):
        # a sampled value of a hand-built trace (an output placeholder), else an expression
        idx = index_of(value)
        if idx is not None:
            return {"rv": idx}
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
            op, a, b = value["derived"]
            return derive(op, decode(a, values, k), decode(b, values, k))
        if "block" in value:
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
    """JSON form of a lambda over buffer indices (as ``transform_layout`` takes; also
    a ``*rest`` map, :data:`~schedules.AXIS_SEPARATOR` results and size variables).

    Example::

        >>> encode_index_map(lambda i, j: (j, i))["results"]
        [{'param': 1}, {'param': 0}]
    """
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

    def index_map(*args):
        # rebuilt over stand-ins of the recorded dtype, then computed in the dtype of
        # the indices it is applied to (int64 buffers index in int64)
        dt = next((a.dtype for a in args if getattr(a, "dtype", "") == "int64"), "int32")
        stand = [E.Var(n, d.get("dtype", "int32")) for n in d["params"]]
        vmap = {id(s): a for s, a in zip(stand, args)}
        vals = [AXIS_SEPARATOR if isinstance(r, dict) and r.get("axis_separator") else
                retype_index(decode_expr(r, stand), dt, vmap) for r in d["results"]]
        return tuple(vals) if d["tuple"] else vals[0]

    index_map.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in d["params"]])
    return index_map


def map_rvs(value, fn):
    """``value`` (encoded) with each handle reference ``{"rv": k}`` replaced by
    ``{"rv": fn(k)}``; ``fn`` may also just collect the ``k``.

    Example::

        >>> seen = []
        >>> _ = map_rvs({"dict": {"a": {"rv": 2}}}, lambda k: seen.append(k) or k)
        >>> seen
        [2]
    """
    if isinstance(value, list):
        return [map_rvs(v, fn) for v in value]
    if isinstance(value, dict):
        if "rv" in value:
            return {"rv": fn(value["rv"])}
        if "derived" in value:
            op, a, b = value["derived"]
            return {"derived": [op, map_rvs(a, fn), map_rvs(b, fn)]}
        if "dict" in value:
            return {"dict": {k: map_rvs(v, fn) for k, v in value["dict"].items()}}
    return value


def holds_handle(value) -> bool:
    """Whether ``value`` (an argument as given, not encoded) contains a handle object,
    i.e. belongs to an instruction built by hand rather than recorded.

    Example::

        >>> from schedules.handles import BlockRV
        >>> holds_handle([1, [BlockRV("C")]]), holds_handle({"rv": 0})
        (True, False)
    """
    if isinstance(value, (BlockRV, LoopRV, E.Var)):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds_handle(v) for v in value)
    if isinstance(value, dict):
        return any(holds_handle(v) for v in value.values())
    return False
