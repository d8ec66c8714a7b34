"""``T.diff``: run a compiled function with every intermediate buffer kept and compare
each one, block by block, with the reference interpreter.

Every buffer a block allocates is promoted to an extra output parameter (in global
memory, full size), the promoted function is built for the target and run, and the
reference -- ``reference`` when given (e.g. the unscheduled function), else the same
function -- runs in :func:`cuvil_tir.interpret` on the same inputs.  Buffers are
matched by name; a buffer the reference does not have (a cache stage the schedule
added) is compared with the interpreter's run of the scheduled function itself.  The
first block, in program order, whose buffer differs beyond tolerance is named.

The function is built through the backend contract (:func:`cuvil_tir.target.build`):
any registered or installed target kind, no ``import targets`` needed.

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> C = T.compute((8,), lambda i: B[i] + 1.0, name="C")
    >>> report = T.diff(T.create_prim_func([A, C]), np.ones(8, "float32"),
    ...                 np.zeros(8, "float32"))
    >>> report.first_divergent is None, [r.buffer for r in report.rows]
    (True, ['B', 'C'])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtype as D
from ..buffer import Buffer
from ..errors import CuvilError, ShapeError
from ..function import PrimFunc
from ..stmt import Block
from ..target import build
from ..visitor import Mutator, Visitor, substitute, used_vars
from ..interp import interpret
from ..expr import IntImm, Var, const
from ..arith import simplify

@dataclass(frozen=True)
class DiffRow:
    """One compared buffer: the block that wrote it last, errors, first bad index."""

    block: str
    buffer: str
    max_abs: float
    max_rel: float
    first_index: tuple | None
    ok: bool


class DiffReport:
    """The rows of a :func:`diff`, in program order; ``first_divergent`` names the
    first block beyond tolerance (``None`` when everything agrees); ``str()`` is a table.

    Example::

        >>> r = DiffReport([DiffRow("B", "B", 0.0, 0.0, None, True)])
        >>> r.first_divergent is None and "B" in str(r)
        True
    """

    def __init__(self, rows):
        self.rows = list(rows)
        bad = [r for r in self.rows if not r.ok]
        self.first_divergent = bad[0].block if bad else None

    def __str__(self) -> str:
        head = f"{'block':<20} {'buffer':<16} {'max abs err':>12} {'max rel err':>12}  first diff"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            idx = "-" if r.first_index is None else str(r.first_index)
            mark = "" if r.ok else "   <-- differs"
            lines.append(f"{r.block:<20} {r.buffer:<16} {r.max_abs:>12.4g} {r.max_rel:>12.4g}"
                         f"  {idx}{mark}")
        verdict = ("every buffer agrees with the interpreter" if self.first_divergent is None
                   else f"first block that diverges: {self.first_divergent}")
        return "\n".join(lines + [verdict])

    __repr__ = __str__


class _Allocs(Visitor):
    def __init__(self):
        self.order: list = []          # blocks, pre-order (program order)
        self.allocs: list = []

    def visit_Block(self, blk):
        self.order.append(blk)
        self.allocs.extend(blk.alloc_buffers)
        self.generic_visit(blk)


class _Promote(Mutator):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_buffer(self, b):
        return self.mapping.get(id(b), b)

    def visit_Block(self, blk):
        new = self.generic_visit(blk)
        if any(id(b) in self.mapping for b in blk.alloc_buffers):
            kept = tuple(b for b in blk.alloc_buffers if id(b) not in self.mapping)
            new = Block(new.name, new.iter_vars, new.reads, new.writes, new.body, new.init,
                        kept, new.annotations)
        return new


def promote_intermediates(func: PrimFunc):
    """``(func', promoted buffers, blocks in program order)``: every allocated buffer
    becomes an extra global output parameter of ``func'``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> C = T.compute((4,), lambda i: B[i] + 1.0, name="C")
        >>> f, extra, _ = promote_intermediates(T.create_prim_func([A, C]))
        >>> [p.name for p in f.params]
        ['A', 'C', 'B']
    """
    walker = _Allocs()
    walker.visit(func.body)
    mapping = {}
    for b in walker.allocs:
        mapping[id(b)] = b.with_changes(scope="global")
    body = _Promote(mapping).visit(func.body)
    promoted = [mapping[id(b)] for b in walker.allocs]
    out = PrimFunc(tuple(func.params) + tuple(promoted), body, func.attrs)
    return out, promoted, walker.order


def _writers(order) -> dict:
    last = {}
    for blk in order:
        for region in blk.writes:
            last[region.buffer.name] = blk.name
    return last


def _compare(got, want, rtol, atol):
    if got.shape != want.shape:
        return float("inf"), float("inf"), (), False
    if D.is_float(str(want.dtype)) or want.dtype.kind == "f":
        g, w = got.astype("float64"), want.astype("float64")
        same_nan = np.isnan(g) & np.isnan(w)
        err = np.where(same_nan, 0.0, np.abs(g - w))
        err = np.where(np.isnan(err), np.inf, err)
        bad = err > atol + rtol * np.abs(np.nan_to_num(w))
    else:
        err = np.abs(got.astype("int64") - want.astype("int64")).astype("float64")
        bad = err > 0
    rel = err / np.maximum(np.abs(np.nan_to_num(want.astype("float64"))), 1e-30)
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None
    max_abs = float(err.max()) if err.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    return max_abs, max_rel, first, not bad.any()


def _as_func(x) -> PrimFunc:
    f = x if isinstance(x, PrimFunc) else getattr(x, "func", None)
    if not isinstance(f, PrimFunc):
        raise CuvilError(f"diff: expected a PrimFunc or a Schedule (an object with .func), "
                         f"found {type(x).__name__}")
    return f


def _run_interpreter(func, arrays):
    interpret(func, *arrays)


def diff(func_or_sch, *arrays, target="llvm", reference=None, rtol: float = 1e-4,
         atol: float = 1e-5) -> DiffReport:
    """Compare every intermediate and output buffer of the compiled ``func_or_sch``
    with the reference interpreter; returns a :class:`DiffReport` (print it).

    ``arrays`` are the function's arguments (never modified: copies are used).
    ``reference``: the function whose interpretation is the truth (default: the same
    function, which checks the code generator); pass the unscheduled function to
    check a schedule.  Floats compare within ``atol + rtol * |want|``, integers
    exactly.

    Example::

        >>> import numpy as np, cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] + 1.0, name="B")
        >>> f = T.create_prim_func([A, B])
        >>> T.diff(f, np.ones(4, "float32"), np.zeros(4, "float32")).first_divergent is None
        True
    """
    func = _as_func(func_or_sch)
    ref = _as_func(reference) if reference is not None else func
    if len(arrays) != len(func.params):
        raise ShapeError(f"diff: {func.name} takes {len(func.params)} argument(s) "
                         f"({', '.join(p.name for p in func.params)}), found {len(arrays)}")
    promoted, extra, order = promote_intermediates(func)
    ref_promoted, ref_extra, _ = promote_intermediates(ref)
    inputs = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in arrays]

    def fresh(bufs, binding):
        return [np.zeros(tuple(int(binding(d)) for d in b.shape), D.to_numpy(b.dtype))
                for b in bufs]

    binding = _size_binding(func, inputs)
    got_extra = fresh(extra, binding)
    got_args = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in inputs]
    build(promoted, target)(*got_args, *got_extra)
    self_extra = fresh(extra, binding)
    self_args = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in inputs]
    _run_interpreter(promoted, self_args + self_extra)
    ref_vals = dict(zip([b.name for b in extra], self_extra))
    ref_vals.update((p.name, a) for p, a in zip(func.params, self_args)
                    if isinstance(p, Buffer))
    if ref is not func:
        r_extra = fresh(ref_extra, _size_binding(ref, inputs))
        r_args = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in inputs]
        _run_interpreter(ref_promoted, r_args + r_extra)
        ref_vals.update(zip([b.name for b in ref_extra], r_extra))
        ref_vals.update((p.name, a) for p, a in zip(ref.params, r_args)
                        if isinstance(p, Buffer))
    got_vals = dict(zip([b.name for b in extra], got_extra))
    got_vals.update((p.name, a) for p, a in zip(func.params, got_args) if isinstance(p, Buffer))
    writer = _writers(order)
    rows, seen = [], set()
    for blk in order:
        for region in blk.writes:
            name = region.buffer.name
            if name in seen or writer.get(name) != blk.name or name not in got_vals:
                continue
            seen.add(name)
            want = ref_vals.get(name)
            if want is None or want.shape != got_vals[name].shape:
                continue
            rows.append(DiffRow(blk.name, name, *_compare(got_vals[name], want, rtol, atol)))
    return DiffReport(rows)


def _size_binding(func, arrays):
    """Evaluate shape expressions of ``func`` from the shapes of ``arrays``."""
    env = {}
    for p, a in zip(func.params, arrays):
        if isinstance(p, Buffer) and isinstance(a, np.ndarray):
            for d, n in zip(p.shape, a.shape):
                if isinstance(d, Var):
                    env.setdefault(id(d), n)
        elif isinstance(p, Var):
            env[id(p)] = a

    def value(e):
        if isinstance(e, IntImm):
            return e.value
        if isinstance(e, Var):
            if id(e) not in env:
                raise ShapeError(f"diff: the size {e.name} of an intermediate buffer is "
                                 "bound by no argument")
            return env[id(e)]
        vals = {v: const(int(env[id(v)]), v.dtype) for v in used_vars(e)}
        out = simplify(substitute(e, vals))
        if not isinstance(out, IntImm):
            raise ShapeError(f"diff: cannot evaluate the buffer dimension {e}")
        return out.value
    return value
