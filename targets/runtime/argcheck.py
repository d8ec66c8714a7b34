"""Check the arguments of a built function before any native code runs.

Two paths share one rule set.  The *fast path* is Python source generated per
signature (a chain of ``is``/``==`` tests, no loops, no allocation) that ends in the
native call; anything it does not accept falls through to the *slow path*, which
re-checks argument by argument and either raises :class:`ArgumentError` naming the
argument, what was expected and what was given, or accepts the call (numpy scalars,
ndarray subclasses, non-native dtype objects …).

Rules: argument count; numpy arrays for buffers (bfloat16 is stored as uint16, the
fp8 dtypes as uint8; ``ml_dtypes`` arrays of those dtypes are accepted too); dtype; rank; each dimension against
constants and symbolic sizes (a size is bound by its first occurrence, later ones must
agree; composite dimensions such as ``n + 1`` are evaluated once all sizes are
bound); C-contiguity and alignment; writeability of arrays the function stores to;
Python ``int``/``float``/``bool`` for scalar parameters; no array the function writes
may share memory with another argument (``mod(x, x)``, or a view of ``x``) unless the
function declares in-place use (``func.with_attr("cuvil.allow_inplace", True)``):
the fast path only accepts distinct arrays that own their memory, the slow path
compares the memory ranges of views.

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> from cuvil_tir.target import Signature
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] + 1.0, name="B")
    >>> call = make_caller(Signature.from_func(T.create_prim_func([A, B])),
    ...                    lambda *a: len(a))
    >>> call((np.zeros(4, "float32"), np.zeros(4, "float32")))
    2
    >>> try:
    ...     call((np.zeros(4, "float32"), np.zeros(3, "float32")))
    ... except ArgumentError as err:
    ...     print(err.message)
    argument 1 'B': expected shape (4,), got (3,)
"""

from __future__ import annotations

import numpy as np

from cuvil_tir import dtype as D
from cuvil_tir.errors import ArgumentError, CodegenError
from cuvil_tir.expr import IntImm, Var
from cuvil_tir.visitor import used_vars

from cuvil_tir.target.signature import Signature, storage_dtype

_PY_OPS = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "FloorMod": "%"}


def _py_expr(e, names: dict) -> str:
    """Python source evaluating a shape expression, given source names of its vars."""
    if isinstance(e, int):
        return str(e)
    if isinstance(e, IntImm):
        return str(e.value)
    if isinstance(e, Var):
        if id(e) not in names:
            raise CodegenError(f"cannot check shape dimension {e}: its size variable "
                               "is bound by no argument")
        return names[id(e)]
    kind = type(e).__name__
    if kind in _PY_OPS:
        return f"({_py_expr(e.a, names)} {_PY_OPS[kind]} {_py_expr(e.b, names)})"
    if kind in ("Min", "Max"):
        return f"{kind.lower()}({_py_expr(e.a, names)}, {_py_expr(e.b, names)})"
    if kind == "Cast":
        return _py_expr(e.value, names)
    raise CodegenError(f"cannot check shape dimension {e}: {kind} is not supported in "
                       "parameter shapes (use sizes, constants, + - * // %)")


def _shape_str(shape) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _scalar_ok(value, dt: str):
    """``(converted, None)`` or ``(None, reason)`` for a scalar argument."""
    if isinstance(value, np.generic):
        value = value.item()
    if D.is_bool(dt):
        if isinstance(value, (bool, int)) and value in (0, 1):
            return bool(value), None
        return None, "expected a bool"
    if D.is_integer(dt):
        if isinstance(value, bool) or not isinstance(value, int):
            return None, f"expected a Python int for {dt}"
        lo, hi = D.int_range(dt)
        if not lo <= value <= hi:
            return None, f"expected an int in [{lo}, {hi}] for {dt}"
        return value, None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"expected a Python float or int for {dt}"
    return float(value), None


# A buffer whose sizes are all int32 is indexed in 32 bits: its last flat index must
# fit, or the address arithmetic wraps and the kernel reads/writes out of bounds.
_INT32_ELEMENTS = 1 << 31


def _narrow(p) -> bool:
    """Whether buffer parameter ``p`` is indexed in int32 (no int64 size)."""
    return not p.shape or all(isinstance(d, int) or D.element(d.dtype) != "int64"
                              for d in p.shape)


def _kind_of(value) -> str:
    if isinstance(value, np.ndarray):
        return f"array of {value.dtype} with shape {_shape_str(value.shape)}"
    return type(value).__name__


class _Slow:
    """The explaining checker; ``__call__`` raises or returns the native result."""

    def __init__(self, sig: Signature, raw):
        self.sig, self.raw = sig, raw
        self.names = ", ".join(p.name for p in sig.params)

    def fail(self, p, text: str):
        raise ArgumentError(f"argument {p.index} '{p.name}': {text}")

    def __call__(self, args):
        sig = self.sig
        if len(args) != len(sig.params):
            raise ArgumentError(f"{sig.name}: expected {len(sig.params)} arguments "
                                f"({self.names}), got {len(args)}")
        out = list(args)
        bound: dict[int, tuple[int, str]] = {}
        for p in sig.params:
            if p.kind == "scalar":
                v, why = _scalar_ok(args[p.index], p.dtype)
                if why is not None:
                    self.fail(p, f"{why}, got {_kind_of(args[p.index])}")
                out[p.index] = v
                bound[id(p.var)] = (int(v) if D.is_integer(p.dtype) else v,
                                    f"argument {p.index} '{p.name}'")
        deferred = []
        for p in sig.buffers:
            a = args[p.index]
            self._check_array(p, a, bound, deferred)
        for p, d, k, a in deferred:
            names = {vid: f"_v{vid}" for vid in bound}
            env = {f"_v{vid}": val for vid, (val, _) in bound.items()}
            want = eval(_py_expr(d, names), env)  # noqa: S307 - our own generated source
            if a.shape[k] != want:
                self._shape_fail(p, a, bound)
        for p in sig.buffers:
            if args[p.index].size > _INT32_ELEMENTS and _narrow(p):
                self.fail(p, f"{args[p.index].size} elements is more than 32-bit indexing "
                             f"reaches (2**31); declare its sizes with "
                             f"T.size_var(name, 'int64')")
        self._check_overlap(args)
        sizes = []
        for v in sig.size_vars:
            val = bound[id(v)][0]
            lo, hi = D.int_range(v.dtype)
            if not lo <= val <= hi:
                raise ArgumentError(f"size {v.name} = {val} does not fit its dtype "
                                    f"{v.dtype}; declare it with T.size_var(name, 'int64')")
            sizes.append(val)
        return self.raw(*out, *sizes)

    def _check_array(self, p, a, bound, deferred):
        want = storage_dtype(p.dtype)
        if not isinstance(a, np.ndarray):
            self.fail(p, f"expected a numpy.ndarray of {p.dtype} with shape "
                         f"{p.shape_text()}, got {type(a).__name__}")
        # ml_dtypes' bfloat16 and float8 arrays name their dtype as Cuvil does
        ok = a.dtype == want or a.dtype.name == p.dtype
        if not ok:
            stored = f" (stored as {want.name})" if want.name != p.dtype else ""
            self.fail(p, f"expected dtype {p.dtype}{stored}, got {a.dtype}")
        if a.ndim != p.rank:
            self.fail(p, f"expected {p.rank} dimension(s), shape {p.shape_text()}, got "
                         f"{a.ndim} (shape {_shape_str(a.shape)})")
        for k, d in enumerate(p.shape):
            if isinstance(d, int):
                if a.shape[k] != d:
                    self._shape_fail(p, a, bound)
            elif isinstance(d, Var):
                if id(d) in bound:
                    if a.shape[k] != bound[id(d)][0]:
                        self._shape_fail(p, a, bound)
                else:
                    bound[id(d)] = (int(a.shape[k]),
                                    f"argument {p.index} '{p.name}' dimension {k}")
            else:
                deferred.append((p, d, k, a))
        if not a.flags.c_contiguous:
            self.fail(p, f"expected a C-contiguous array, got strides {a.strides}; pass "
                         f"np.ascontiguousarray({p.name})")
        if not a.flags.aligned:
            self.fail(p, f"expected an array aligned to its element size "
                         f"({a.dtype.itemsize} bytes), got an unaligned one")
        if p.writes and not a.flags.writeable:
            self.fail(p, f"the function writes to {p.name} but the array is read-only; "
                         "pass a writeable array")

    def _check_overlap(self, args):
        check_overlap(self.sig, args, np.may_share_memory, self.fail)

    def _shape_fail(self, p, a, bound):
        syms = []
        for d in p.shape:
            if not isinstance(d, int):
                for v in used_vars(d):
                    if id(v) in bound and v.name not in [s[0] for s in syms]:
                        syms.append((v.name, bound[id(v)]))
        extra = "".join(f"; {name} = {val} (bound by {where})"
                        for name, (val, where) in syms)
        self.fail(p, f"expected shape {p.shape_text()}{extra}, got {_shape_str(a.shape)}")


def check_overlap(sig: Signature, args, overlaps, fail) -> None:
    """Call ``fail(param, text)`` for the first written buffer of ``args`` that
    ``overlaps(a, b)`` another buffer argument (unless ``sig`` allows in-place use).

    ``overlaps`` is the backend's notion of shared memory: ``np.may_share_memory`` on
    host arrays, device address ranges on a GPU.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X"),
        ...                         T.compute((2,), lambda i: 1.0, name="Y")])
        >>> x = np.zeros(2, "float32")
        >>> check_overlap(Signature.from_func(f), (x, x), np.may_share_memory,
        ...               lambda p, text: print(p.name, text[:30]))
        Y overlaps argument 0 'X' in mem
    """
    if sig.allow_inplace:
        return
    bufs = sig.buffers
    for w in bufs:
        if not w.writes:
            continue
        for o in bufs:
            if o is w or (o.writes and o.index < w.index):
                continue
            if overlaps(args[w.index], args[o.index]):
                fail(w, f"overlaps argument {o.index} '{o.name}' in memory, and "
                        f"the function writes {w.name}; pass separate arrays "
                        f"(e.g. np.copy), or declare in-place use with "
                        f"func.with_attr('cuvil.allow_inplace', True) if the "
                        f"function is written for it")
                return


def make_caller(sig: Signature, raw):
    """A function ``call(args_tuple)`` that checks ``args`` then returns ``raw(...)``.

    ``raw`` receives, in parameter order, the arrays themselves and the converted
    scalars, then one int per symbolic size of ``sig.size_vars``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> make_caller(Signature.from_func(f), lambda x: x.shape)((np.zeros(2, "float32"),))
        (2,)
    """
    slow = _Slow(sig, raw)
    env = {"ndarray": np.ndarray, "raw": raw, "slow": slow}
    names: dict[int, str] = {}
    lines = ["def fast(args):", f"    if len(args) != {len(sig.params)}:",
             "        return slow(args)"]
    argv = [f"a{p.index}" for p in sig.params]
    if argv:
        lines.append(f"    {', '.join(argv)}{',' if len(argv) == 1 else ''} = args")
    conds, late = [], []
    for p in sig.params:
        a = f"a{p.index}"
        if p.kind == "scalar":
            if D.is_bool(p.dtype):
                conds.append(f"type({a}) is bool")
            elif D.is_integer(p.dtype):
                lo, hi = D.int_range(p.dtype)
                conds.append(f"type({a}) is int and {lo} <= {a} <= {hi}")
            else:
                conds.append(f"(type({a}) is float or type({a}) is int)")
            names[id(p.var)] = a
    steps = []   # (condition-or-binding) in order
    for p in sig.buffers:
        a, s, f = f"a{p.index}", f"s{p.index}", f"f{p.index}"
        env[f"d{p.index}"] = storage_dtype(p.dtype)
        steps.append(("cond", f"type({a}) is ndarray and {a}.dtype is d{p.index}"))
        steps.append(("bind", f"{s} = {a}.shape"))
        if all(isinstance(d, int) for d in p.shape):
            # one tuple comparison checks rank and every dimension
            steps.append(("cond", f"{s} == {tuple(p.shape)!r}"))
        else:
            steps.append(("cond", f"len({s}) == {p.rank}"))
        for k, d in enumerate(p.shape if not steps[-1][1].startswith(f"{s} ==") else ()):
            if isinstance(d, int):
                steps.append(("cond", f"{s}[{k}] == {d}"))
            elif isinstance(d, Var):
                if id(d) in names:
                    steps.append(("cond", f"{s}[{k}] == {names[id(d)]}"))
                else:
                    names[id(d)] = f"{s}[{k}]"
            else:
                late.append((s, k, d))
        if _narrow(p) and not all(isinstance(d, int) for d in p.shape):
            steps.append(("cond", f"{a}.size <= {_INT32_ELEMENTS}"))
        flag = f"{f}.c_contiguous and {f}.aligned" + (f" and {f}.writeable" if p.writes else "")
        steps.append(("bind", f"{f} = {a}.flags"))
        steps.append(("cond", flag))
    for s, k, d in late:
        steps.append(("cond", f"{s}[{k}] == {_py_expr(d, names)}"))
    bufs = sig.buffers
    if not sig.allow_inplace and len(bufs) > 1 and any(p.writes for p in bufs):
        # distinct arrays that own their memory cannot overlap; anything else (a view,
        # the same array twice) takes the slow path, which compares memory ranges
        owners = " and ".join(f"a{p.index}.base is None" for p in bufs)
        ids = ", ".join(f"id(a{p.index})" for p in bufs)
        steps.append(("cond", f"{owners} and len({{{ids}}}) == {len(bufs)}"))
    for v in sig.size_vars:
        lo, hi = D.int_range(v.dtype)
        if hi < (1 << 62):
            steps.append(("cond", f"{_py_expr(v, names)} <= {hi}"))
    # one level deep whatever the number of parameters: nesting a test per step hit
    # Python's limit on indentation for functions of some thirty buffers
    for kind, text in ([("cond", " and ".join(conds))] if conds else []) + steps:
        if kind == "bind":
            lines.append(f"    {text}")
        else:
            lines.append(f"    if not ({text}):")
            lines.append("        return slow(args)")
    call_args = argv + [_py_expr(v, names) for v in sig.size_vars]
    lines.append(f"    return raw({', '.join(call_args)})")
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<argcheck {sig.name}>", "exec"), env)  # noqa: S102
    fast = env["fast"]
    fast.source = source
    fast.slow = slow
    return fast
