"""TVMScript as TVM prints it: the constructs the parser accepts beyond Cuvil's own form.

A user migrating from TVM pastes what TVM printed; these read it into ordinary Cuvil IR:

* ``a: T.handle`` parameters with ``A = T.match_buffer(a, shape, dtype, ...)``: the
  parameter becomes the buffer ``A``;
* ``A_sub = T.match_buffer(A[i:i + 4, 0:16], (4, 16))`` inside a block: a *view* of the
  region; ``A_sub[x, y]`` reads ``A[i + x, y]``.  A view's ``elem_offset=v`` and
  ``strides=[s1, s0]`` variables are bound to the region's flat offset and ``A``'s
  strides;
* buffer keywords ``elem_offset`` (``0``, or a variable: Cuvil buffers start at their
  first element, so a parameter's offset variable is ``0``), ``offset_factor``
  (a positive int; nothing to check when offsets are known), ``buffer_type``
  (``"default"``/``"auto"``) and ``axis_separators`` (kept on a declared buffer; a
  view's follow from its source);
* ``with T.launch_thread("threadIdx.x", n) as tx:`` and ``bx = T.launch_thread(
  "blockIdx.x", n)`` (binding ``bx`` for the rest of the suite): a thread-bound loop;
* ``c = T.allocate_const(values, dtype, extents)`` (with ``T.decl_buffer(...,
  data=c)``) and ``with T.allocate_const(...) as c:``: a buffer filled with the
  constants before its first use (a block ``<name>_const`` at block level);
* ``A.data``, ``A.elem_offset``, ``A.shape``, ``A.dtype``, ``A.strides`` and
  ``A.access_ptr(mask, offset=..., extent=...)`` (a buffer region, which is how Cuvil
  passes memory to ``T.call_extern``); a declared buffer's ``A.elem_offset`` (and its
  ``elem_offset=v`` variable) is the ``elem_offset`` op (:mod:`cuvil_tir.ops.elem_offset`):
  0 where the function runs, the tile's offset in a tensor intrinsic's impl.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... def f(a: T.handle):
    ...     A = T.match_buffer(a, (4,), "float32", offset_factor=1)
    ...     for i in range(4):
    ...         A[i] += T.float32(1)
    ... ''')
    >>> f.params[0].name, str(f.body.body)
    ('A', 'A[i] = A[i] + T.float32(1)')
"""

from __future__ import annotations

from .. import dtype as D
from ..buffer import Buffer
from ..errors import CuvilError
from ..expr import Expr, IntImm, Var
from ..stmt import (Allocate, Block, BlockRealize, BufferRegion, BufferStore, For, Range,
                    seq)
from .evaluate import make_access
from .values import Spec, to_expr
from ..ops.elem_offset import elem_offset
from .buffer_alias import alias_of
from .tvm_calls import make_pointer
from .tvm_lowered import EnvThread

#: ``x = T.<kind>(...)`` statements this module builds
TVM_ASSIGN = ("match_buffer", "decl_buffer", "buffer_decl", "allocate_const")
_BUFFER_TYPES = ("", "default", "auto")


class BufferView:
    """A buffer matched to a region of another buffer inside a block."""

    is_buffer_view = True

    def __init__(self, name: str, region: BufferRegion, shape: tuple):
        self.name = name
        self.source = region.buffer
        self.region = region.region
        self.view_shape = tuple(to_expr(s, "int32") for s in shape)
        self.dtype = self.source.dtype
        # the view's dimensions are the region's trailing ones; the leading region
        # dimensions left over must have extent 1 (TVM drops unit dimensions)
        lead = len(self.region) - len(self.view_shape)
        if lead < 0 or any(not _is_one(r.extent) for r in self.region[:lead]):
            raise CuvilError(
                f"T.match_buffer: buffer {name} of shape {_dims(self.view_shape)} does "
                f"not match the region {region} (extents "
                f"{_dims(r.extent for r in self.region)}); the shapes must agree once "
                "the region's leading unit dimensions are dropped")
        for r, s in zip(self.region[lead:], self.view_shape):
            if isinstance(r.extent, IntImm) and isinstance(s, IntImm) and \
                    r.extent.value != s.value:
                raise CuvilError(f"T.match_buffer: buffer {name} has extent {s.value} where "
                                 f"the region {region} has {r.extent.value}")
        self.lead = lead

    def getitem(self, idx):
        out = [r.min for r in self.region[:self.lead]]
        for r, ix in zip(self.region[self.lead:], idx):
            if isinstance(ix, Range):
                out.append(Range(_add(r.min, ix.min), ix.extent))
            else:
                out.append(_add(r.min, to_expr(ix, r.min.dtype)))
        return make_access(self.source, out)

    def full(self) -> BufferRegion:
        return BufferRegion(self.source, self.region)

    def view_strides(self) -> tuple:
        return self.source.default_strides()[self.lead:]

    def elem_offset(self) -> Expr:
        total = None
        for r, st in zip(self.region, self.source.default_strides()):
            term = r.min * st
            total = term if total is None else total + term
        return total if total is not None else IntImm(0, "int32")

    def __repr__(self) -> str:
        return f"{self.name} (a view of {self.full()})"


def _is_one(e) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _add(a: Expr, b: Expr) -> Expr:
    if isinstance(a, IntImm) and a.value == 0:
        return b
    if isinstance(b, IntImm) and b.value == 0:
        return a
    return a + b


def _dims(xs) -> str:
    return "(" + ", ".join(str(x) for x in xs) + ")"


class TVMScriptMixin:
    """The Builder's TVMScript statements (see the module docstring)."""

    # buffers -------------------------------------------------------------------------------
    def buffer_extras(self, kw: dict, tree, view_offset=None, name=None) -> None:
        """Check TVMScript's buffer keywords; bind offset variables (see module doc)."""
        for key in ("offset_factor", "buffer_type", "axis_separators", "elem_offset",
                    "data"):
            if key not in kw:
                continue
            v = kw[key]
            if key == "offset_factor":
                if not (isinstance(v, int) and v >= 0) and not isinstance(v, IntImm):
                    raise self.error(f"offset_factor: expected a non-negative int, found "
                                     f"{v!r}", tree)
            elif key == "buffer_type":
                if v not in _BUFFER_TYPES:
                    raise self.error(f"buffer_type={v!r} is not supported; Cuvil buffers "
                                     f"are {' or '.join(repr(b) for b in _BUFFER_TYPES[1:])}",
                                     tree)
            elif key == "axis_separators" and view_offset is None:
                # a declared buffer keeps them (Buffer checks them); a view's are its
                # source's, seen through the region: the view dissolves into accesses of
                # the source, whose separators decide the physical layout
                if not isinstance(v, (list, tuple)):
                    raise self.error(f"axis_separators: expected a list of ints such as "
                                     f"[1], found {v!r}", tree)
            elif key == "elem_offset":
                # a declared buffer's offset variable is its elem_offset: 0 where the
                # function runs, the tile's offset in a tensor intrinsic's impl
                offset = view_offset if view_offset is not None else \
                    elem_offset(name) if name else IntImm(0, "int32")
                if isinstance(v, Var):
                    self.bind(v.name, offset)
                elif v is not None and not (isinstance(v, (int, IntImm)) and int(v) == 0
                                            and view_offset is None):
                    raise self.error(f"elem_offset={v!r}: a Cuvil buffer starts at its "
                                     "first element; use 0 or an offset variable", tree)
        unknown = set(kw) - {"strides", "scope", "align", "name", "offset_factor",
                             "buffer_type", "axis_separators", "elem_offset", "data",
                             "dtype", "shape"}
        if unknown:
            raise self.error(f"unknown buffer keyword(s) {sorted(unknown)}; expected shape, "
                             "dtype, strides, scope, align, elem_offset, offset_factor", tree)

    def buffer_attribute(self, base, name: str, tree):
        """``A.data``, ``A.elem_offset``, ``A.shape`` ... of a buffer or a view."""
        view = getattr(base, "is_buffer_view", False)
        if name == "shape":
            return base.view_shape if view else base.shape
        if name == "dtype":
            return base.dtype
        if name == "name":
            return base.name
        if name == "elem_offset":
            return base.elem_offset() if view else elem_offset(base.name)
        if name == "strides":
            return base.view_strides() if view else base.default_strides()
        if name == "data":
            return BufferRegion.full(base.source) if view else BufferRegion.full(base)
        if name == "access_ptr":
            return lambda *a, **k: self.access_ptr(base, tree, *a, **k)
        raise self.error(f"buffer {base.name} has no attribute '{name}'; expected shape, "
                         "dtype, strides, data, elem_offset or access_ptr", tree)

    def access_ptr(self, base, tree, access_mask="rw", ptr_type="handle", content_lanes=1,
                   offset=0, extent=None):
        """``A.access_ptr(mask, offset=o, extent=e)``: a pointer (see :mod:`.tvm_calls`)."""
        view = getattr(base, "is_buffer_view", False)
        return self.wrap(make_pointer, tree, base, access_mask, offset, extent, view)

    # statements -----------------------------------------------------------------------------
    def tvm_assign(self, name: str, v: Spec, ctx, t, rhs):
        """``x = T.match_buffer / T.decl_buffer / T.allocate_const(...)``."""
        if v.kind == "match_buffer":
            return self.match_buffer(name, v, ctx, t)
        if v.kind == "allocate_const":
            return self.allocate_const(name, v, ctx, t)
        return self.decl_buffer(name, v, ctx, t, rhs)

    def match_buffer(self, name, v: Spec, ctx, t):
        args, kw = v.args, v.kwargs
        if not args:
            raise self.error("T.match_buffer expects (handle or region, shape, dtype)", t)
        target, rest = args[0], list(args[1:])
        shape = kw.get("shape", rest[0] if rest else None)
        dtype = kw.get("dtype", rest[1] if len(rest) > 1 else None)
        if isinstance(target, Var) and target.dtype == "handle":
            if ctx is None or not ctx.is_func:
                raise self.error("T.match_buffer of a handle belongs at the top of the "
                                 "function body", t)
            if id(target) in self.handles:
                raise self.error(f"parameter '{target.name}' is matched twice", t)
            if shape is None:
                raise self.error(f"T.match_buffer({target.name}, ...) needs a shape", t)
            spec = Spec("Buffer", (shape, dtype or "float32"),
                        {k: x for k, x in kw.items() if k not in ("shape", "dtype")})
            buf = self.make_buffer(name, spec, t)
            self.handles[id(target)] = buf
            self.bind(name, buf, "param")
            return None
        region = target
        if isinstance(region, Buffer):
            region = BufferRegion.full(region)
        elif not isinstance(region, BufferRegion):
            load = region
            if not hasattr(load, "indices"):
                raise self.error(f"T.match_buffer expects a handle parameter or a buffer "
                                 f"region such as A[i, 0:16], found {target!r}", t)
            region = make_access(load.buffer, [Range(i, IntImm(1, i.dtype))
                                               for i in load.indices])
        if ctx is None or ctx.is_func:
            raise self.error("T.match_buffer of a region belongs directly inside a block "
                             "(after its T.reads/T.writes)", t)
        if dtype is not None and D.canonical(dtype) != region.buffer.dtype:
            raise self.error(f"T.match_buffer: dtype {dtype} differs from the matched "
                             f"buffer {region.buffer.name}'s {region.buffer.dtype}", t)
        view = self.wrap(lambda: BufferView(name, region, tuple(
            shape if isinstance(shape, (tuple, list)) else
            (() if shape is None else (shape,)))), t)
        self.buffer_extras({k: x for k, x in kw.items() if k not in ("strides",)}, t,
                           view_offset=view.elem_offset())
        strides = kw.get("strides") or ()
        src = region.buffer.default_strides()[view.lead:]
        if strides and len(strides) != len(src):
            raise self.error(f"T.match_buffer: {len(strides)} strides for a "
                             f"{len(src)}-dimensional view", t)
        for s, actual in zip(strides, src):
            if isinstance(s, Var):
                self.bind(s.name, actual)
        self.bind(name, view, "buffer")
        return None

    def decl_buffer(self, name, v: Spec, ctx, t, rhs):
        data = v.kwargs.get("data")
        if isinstance(data, Buffer):
            # the memory of T.allocate / T.allocate_const: that buffer, or an alias of it
            return self.alias_buffer(name, v, data, t)
        if isinstance(data, BufferRegion) and data == BufferRegion.full(data.buffer):
            return self.alias_buffer(name, v, data.buffer, t)        # data=A.data
        if isinstance(data, Var) and data.dtype == "handle":
            return self.decl_over_handle(name, v, data, ctx, t)      # data=a (a handle)
        if data is not None:
            raise self.error(f"{name}: data= must be a buffer's data (A.data), a handle "
                             f"parameter or the result of T.allocate or T.allocate_const, "
                             f"found {data!r}", t)
        if ctx is None:
            raise self.error("T.decl_buffer without data= allocates: put it directly "
                             "inside a block or the function body", t)
        buf = self.make_buffer(name, Spec("alloc_buffer", v.args, v.kwargs), rhs)
        ctx.allocs.append(buf)
        self.bind(name, buf, "buffer")
        return None

    def alias_buffer(self, name, v: Spec, source, t):
        """``name = T.decl_buffer(shape, dtype, data=A.data)``: an alias of ``A``'s
        memory (see :mod:`.buffer_alias`)."""
        args, kw = list(v.args), v.kwargs
        shape = kw.get("shape", args[0] if args else None)
        dtype = kw.get("dtype", args[1] if len(args) > 1 else "float32")
        if shape is None:
            raise self.error(f"{name}: T.decl_buffer needs a shape", t)
        shape = shape if isinstance(shape, (tuple, list)) else (shape,)
        extra = {k for k in set(kw) - {"shape", "dtype", "data", "scope", "align", "name",
                                       "offset_factor", "elem_offset", "buffer_type"}
                 if kw[k] not in (None, (), [])}
        if extra:
            raise self.error(f"{name}: an alias of {source.name}'s data takes no "
                             f"{sorted(extra)} (it has {source.name}'s layout)", t)
        view = self.wrap(lambda: alias_of(name, source, tuple(to_expr(s, "int32")
                                                              for s in shape),
                                          D.canonical(dtype)), t)
        self.bind(name, view, "buffer")
        return None

    def decl_over_handle(self, name, v: Spec, handle, ctx, t):
        """``name = T.decl_buffer(shape, dtype, data=a)`` of a handle parameter ``a``:
        as ``T.match_buffer(a, shape, dtype)``, the parameter becomes the buffer."""
        kw = {k: x for k, x in v.kwargs.items() if k != "data"}
        return self.match_buffer(name, Spec("match_buffer", (handle,) + tuple(v.args), kw),
                                 ctx, t)

    def const_buffer(self, name, v: Spec, t):
        args, kw = list(v.args), dict(v.kwargs)
        values = kw.pop("data", args[0] if args else None)
        dtype = kw.pop("dtype", args[1] if len(args) > 1 else "float32")
        extents = kw.pop("extents", args[2] if len(args) > 2 else None)
        if not isinstance(values, (list, tuple)):
            raise self.error("T.allocate_const expects a list of values, a dtype and the "
                             "extents, e.g. T.allocate_const([1, 2], \"int32\", [2])", t)
        extents = [len(values)] if extents is None else list(extents)
        total = 1
        for e in extents:
            total *= int(e)
        if total != len(values):
            raise self.error(f"T.allocate_const: {len(values)} values for extents "
                             f"{extents} ({total} elements)", t)
        buf = self.make_buffer(name, Spec("alloc_buffer", (tuple(extents), dtype), kw), t)
        strides = [int(s) for s in buf.default_strides()]
        stores = []
        for k, x in enumerate(values):
            idx = tuple(IntImm((k // st) % int(e), "int32") for st, e in zip(strides, extents))
            stores.append(self.wrap(lambda x=x, idx=idx: BufferStore(
                buf, to_expr(x, buf.dtype), idx), t))
        return buf, stores

    def allocate_const(self, name, v: Spec, ctx, t):
        if ctx is None:
            raise self.error("T.allocate_const belongs directly inside a block or the "
                             "function body; inside loops use 'with T.allocate_const(...) "
                             "as name:'", t)
        buf, stores = self.const_buffer(name, v, t)
        ctx.allocs.append(buf)
        self.bind(name, buf, "buffer")
        init = Block(f"{name}_const", (), (), (BufferRegion.full(buf),), seq(*stores))
        return BlockRealize((), IntImm(1, "bool"), init)

    def with_allocate_const(self, name, v: Spec, suite, t):
        buf, stores = self.const_buffer(name, v, t)
        return Allocate(buf, seq(*stores, self.body(suite, None, {name: buf}, "buffer")))

    def launch_thread(self, name: str, v: Spec, make_body, t):
        """``with T.launch_thread("threadIdx.x", n) as tx:`` (or ``bx =
        T.launch_thread("blockIdx.x", n)`` for the rest of the suite): a loop bound to
        the thread axis, ``for tx in T.thread_binding(n, thread="threadIdx.x")`` (a GPU
        construct: a CPU build refuses it)."""
        args, kw = list(v.args), dict(v.kwargs)
        tag = kw.pop("thread", args.pop(0) if args else None)
        extent = kw.pop("extent", args.pop(0) if args else None)
        env = tag if isinstance(tag, EnvThread) else None
        tag = env.tag if env is not None else tag
        if not isinstance(tag, str) or extent is None or args or kw:
            raise self.error("T.launch_thread expects (thread tag, extent), e.g. "
                             "T.launch_thread(\"threadIdx.x\", 128), or (a T.env_thread "
                             "variable, extent)", t)
        ext = to_expr(extent, "int32")
        var = env.var if env is not None else Var(name, ext.dtype)
        # the launched axes around a statement (an all-reduce reduces over some)
        self.launched.append((tag, var, ext))
        try:
            body = make_body(var)
        finally:
            self.launched.pop()
        return For(var, IntImm(0, ext.dtype), ext, "thread_binding", body, tag)

    def match_params(self, plist: list, tree) -> list:
        """Handle parameters replaced by the buffers ``T.match_buffer`` made of them."""
        out = []
        for p in plist:
            if isinstance(p, Var) and p.dtype == "handle":
                buf = self.handles.get(id(p))
                if buf is None:
                    raise self.error(f"parameter '{p.name}: T.handle' is never matched; add "
                                     f"X = T.match_buffer({p.name}, shape, dtype) at the top "
                                     "of the body", tree)
                p = buf
            out.append(p)
        return out


__all__ = ["TVMScriptMixin", "BufferView", "TVM_ASSIGN"]
