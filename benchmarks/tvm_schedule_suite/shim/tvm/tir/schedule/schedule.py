"""``tvm.tir.Schedule`` on top of ``schedules.Schedule``.

Each method takes TVM's signature (names, keywords, buffer given as an index, a name,
a ``("read"|"write", i)`` pair or a Buffer) and calls the Cuvil primitive.  A TVM
option Cuvil has no counterpart for, used with a non-default value, raises
:class:`ShimGap`; a primitive Cuvil lacks raises :class:`MissingPrimitive`.
"""

from __future__ import annotations

import functools

import schedules as S
from cuvil_tir import IRModule, PrimFunc
from cuvil_tir.buffer import Buffer
from schedules.handles import BlockRV, LoopRV
from schedules.sampling import Sampled

from ..._compare import scheduled
from ..._gap import Gap, OutOfScope, ShimGap
from ...script.tir import Unparsed

ScheduleError = S.ScheduleError


class TensorIntrin:
    """``tir.TensorIntrin.register``: an intrinsic whose functions did not parse is
    remembered, so that only the cases tensorizing with it fail."""

    unparsed: dict = {}

    @staticmethod
    def register(name, desc, impl, override=False):
        bad = [f for f in (desc, impl) if isinstance(f, Unparsed)]
        if bad:
            TensorIntrin.unparsed[name] = bad[0]
            return None
        return S.TensorIntrin.register(name, desc, impl)

    @staticmethod
    def get(name, allow_missing=False):
        if name in TensorIntrin.unparsed:
            TensorIntrin.unparsed[name]._fail()
        return S.TensorIntrin.get(name, allow_missing=allow_missing)


class MissingPrimitive(ShimGap):
    """A TVM schedule primitive Cuvil does not have."""


def main_func(mod) -> PrimFunc:
    """The PrimFunc a TVM test schedules: a function, or a module's only or ``main``
    function."""
    if isinstance(mod, Unparsed):
        mod._fail()
    if isinstance(mod, PrimFunc):
        return mod
    if isinstance(mod, IRModule):
        if len(mod.functions) == 1:
            return mod.functions[0]
        return mod["main"]
    raise ShimGap(f"Schedule of {type(mod).__name__}")


def _scheduled(mod):
    """What Cuvil schedules: a function, or a module of several (see work_on)."""
    if isinstance(mod, IRModule) and len(mod.functions) > 1:
        return mod
    return main_func(mod)


def _check_args(args):
    for a in args:
        if isinstance(a, Gap):
            a()
        if isinstance(a, (list, tuple)):
            _check_args(a)


def _gap_unless(name: str, option: str, value, default):
    if value != default:
        raise ShimGap(f"Schedule.{name}({option}={value!r}): no Cuvil counterpart")


class Schedule:
    """TVM's ``tir.Schedule(mod)`` over a Cuvil schedule."""

    def __init__(self, mod, *, seed=None, debug_mask="all", error_render_level="detail",
                 enable_check=True):
        self._orig = _scheduled(mod)
        self._sch = S.Schedule(self._orig, seed=seed if seed not in (None, -1) else None,
                               error_render=error_render_level)

    @classmethod
    def _wrap(cls, sch, orig):
        self = cls.__new__(cls)
        self._orig, self._sch = orig, sch
        return self

    # state -----------------------------------------------------------------------
    @property
    def mod(self) -> IRModule:
        if isinstance(self._orig, IRModule):
            mod = self._sch.mod
            for f in mod.functions:
                scheduled(f)
            return mod
        mod = IRModule.from_func(self._sch.func.with_attr("global_symbol", "main"))
        scheduled(mod.functions[0])
        return mod

    @property
    def func_working_on(self):
        return self._sch.func_working_on

    @property
    def func(self) -> PrimFunc:
        return self._sch.func

    @property
    def trace(self):
        from .trace import Trace
        return Trace.of(self._sch.trace)

    def copy(self) -> "Schedule":
        return Schedule._wrap(self._sch.copy(), self._orig)

    def show(self, *args, **kwargs):
        self._sch.show()

    def work_on(self, func_name: str) -> None:
        self._sch.work_on(func_name)

    def get(self, rv):
        """The Block or For node a handle names (or a sampled value)."""
        if isinstance(rv, (BlockRV, LoopRV, Sampled)):
            return self._sch.get(rv)
        return rv

    _get = get

    def remove_rv(self, rv) -> None:
        self._sch.remove_rv(rv)

    def get_sref(self, rv):
        from .state import StmtSRef
        self._sch.get(rv)          # a handle this schedule does not know fails here
        return StmtSRef(self, rv)

    @property
    def state(self):
        from .state import ScheduleState
        return ScheduleState.of(self, self._sch)

    # queries -----------------------------------------------------------------------
    def get_block(self, name: str, func_name=None):
        if func_name is None or not isinstance(self._orig, IRModule):
            return self._sch.get_block(name)
        return self._sch.get_block(name, func_name=func_name)

    def get_loops(self, block):
        return self._sch.get_loops(_block(block))

    def get_child_blocks(self, block_or_loop):
        return self._sch.get_child_blocks(block_or_loop)

    def get_producers(self, block):
        return self._sch.get_producers(_block(block))

    def get_consumers(self, block):
        return self._sch.get_consumers(_block(block))

    # loops --------------------------------------------------------------------------
    def split(self, loop, factors, preserve_unit_iters=True, disable_predication=False):
        _check_args([loop, factors])
        _gap_unless("split", "preserve_unit_iters", preserve_unit_iters, True)
        factors = [_int_or_none(f) for f in factors]
        if disable_predication:
            return self._sch.split(loop, factors, disable_predication=True)
        return self._sch.split(loop, factors)

    def fuse(self, *loops, preserve_unit_iters=True):
        _gap_unless("fuse", "preserve_unit_iters", preserve_unit_iters, True)
        if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
            loops = tuple(loops[0])
        return self._sch.fuse(*loops)

    def reorder(self, *loops):
        if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
            loops = tuple(loops[0])
        return self._sch.reorder(*loops)

    def parallel(self, loop):
        return self._sch.parallel(loop)

    def vectorize(self, loop):
        return self._sch.vectorize(loop)

    def unroll(self, loop):
        return self._sch.unroll(loop)

    def bind(self, loop, thread_axis):
        return self._sch.bind(loop, thread_axis)

    # compute location ---------------------------------------------------------------
    def compute_at(self, block, loop, preserve_unit_loops=False, index=-1):
        return self._sch.compute_at(_block(block), loop, preserve_unit_loops, index=index)

    def reverse_compute_at(self, block, loop, preserve_unit_loops=False, index=-1):
        return self._sch.reverse_compute_at(_block(block), loop, preserve_unit_loops,
                                            index=index)

    def compute_inline(self, block):
        return self._sch.compute_inline(_block(block))

    def reverse_compute_inline(self, block):
        return self._sch.reverse_compute_inline(_block(block))

    # caches and buffers ---------------------------------------------------------------
    def cache_read(self, block, read_buffer_index, storage_scope, consumer_blocks=None):
        block = _block(block)
        idx = self._buffer_index(block, read_buffer_index, "read")
        if consumer_blocks is None:
            return self._sch.cache_read(block, idx, storage_scope)
        return self._sch.cache_read(block, idx, storage_scope,
                                    consumer_blocks=[_block(b) for b in consumer_blocks])

    def cache_write(self, block, write_buffer_index, storage_scope, consumer_blocks=None):
        block = _block(block)
        idx = self._buffer_index(block, write_buffer_index, "write")
        if consumer_blocks is None:
            return self._sch.cache_write(block, idx, storage_scope)
        return self._sch.cache_write(block, idx, storage_scope,
                                     consumer_blocks=[_block(b) for b in consumer_blocks])

    def cache_inplace(self, block, read_buffer_index, storage_scope):
        block = _block(block)
        idx = self._buffer_index(block, read_buffer_index, "read")
        return self._sch.cache_inplace(block, idx, storage_scope)

    def set_scope(self, block, buffer_index, storage_scope):
        block = _block(block)
        return self._sch.set_scope(block, self._buffer_index(block, buffer_index, "write"),
                                   storage_scope)

    def storage_align(self, block, buffer_index, axis, factor, offset):
        block = _block(block)
        return self._sch.storage_align(block, self._buffer_index(block, buffer_index, "write"),
                                       axis, factor, offset)

    def transform_layout(self, block, buffer, index_map, pad_value=None,
                         assume_injective_transform=False):
        block = _block(block)
        kind, idx = self._buffer_kind_index(block, buffer)
        return self._sch.transform_layout(
            block, idx, _index_map(index_map), kind, pad_value=_index_map(pad_value),
            assume_injective_transform=assume_injective_transform)

    def set_axis_separator(self, block, buffer, axis_separators):
        block = _block(block)
        kind, idx = self._buffer_kind_index(block, buffer)
        return _index_refusal_as_assertion(buffer, lambda: self._sch.set_axis_separator(
            block, idx, list(axis_separators), buffer_index_type=kind))

    def unsafe_set_dtype(self, block, buffer_index, dtype):
        block = _block(block)
        return self._sch.unsafe_set_dtype(block, self._buffer_index(block, buffer_index,
                                                                    "write"), dtype)

    def transform_block_layout(self, block, index_map):
        return self._sch.transform_block_layout(_block(block), _index_map(index_map))

    def reindex(self, block, buffer):
        block = _block(block)
        if isinstance(buffer, Buffer):
            buffer = self._buffer_kind_index(block, buffer)
        return self._sch.reindex(block, buffer)

    def reindex_cache_read(self, block, read_buffer_index, storage_scope, index_map):
        block = _block(block)
        idx = self._buffer_index(block, read_buffer_index, "read")
        return self._sch.reindex_cache_read(block, idx, storage_scope, _index_map(index_map))

    def reindex_cache_write(self, block, write_buffer_index, storage_scope, index_map):
        block = _block(block)
        idx = self._buffer_index(block, write_buffer_index, "write")
        return self._sch.reindex_cache_write(block, idx, storage_scope,
                                             _index_map(index_map))

    def pad_einsum(self, block, padding):
        return self._sch.pad_einsum(_block(block), list(padding))

    # reductions, blocks, annotations ---------------------------------------------------
    def decompose_reduction(self, block, loop):
        return self._sch.decompose_reduction(_block(block), loop)

    def rfactor(self, loop, factor_axis):
        return self._sch.rfactor(loop, factor_axis)

    def blockize(self, target, preserve_unit_iters=True):
        if isinstance(target, (list, tuple)):
            target = [_block(b) for b in target]
        return self._sch.blockize(target, preserve_unit_iters=preserve_unit_iters)

    def tensorize(self, block_or_loop, tensor_intrin, preserve_unit_iters=True):
        _check_args([tensor_intrin])
        if tensor_intrin in TensorIntrin.unparsed:
            TensorIntrin.unparsed[tensor_intrin]._fail()
        if isinstance(tensor_intrin, str) and not _known_intrin(tensor_intrin):
            raise OutOfScope(f"tensor intrinsic {tensor_intrin!r} is registered in TVM's C++")
        return self._sch.tensorize(block_or_loop, tensor_intrin)

    def annotate(self, block_or_loop, ann_key, ann_val):
        return self._sch.annotate(block_or_loop, ann_key, ann_val)

    def unannotate(self, block_or_loop, ann_key):
        return self._sch.unannotate(block_or_loop, ann_key)

    # sampling -------------------------------------------------------------------------
    def sample_perfect_tile(self, loop, n, max_innermost_factor=16, decision=None):
        return self._sch.sample_perfect_tile(loop, n, max_innermost_factor, decision=decision)

    def sample_categorical(self, candidates, probs, decision=None):
        return self._sch.sample_categorical(list(candidates), list(probs), decision=decision)

    # buffers named the TVM ways ----------------------------------------------------------
    def _regions(self, block, kind):
        b = self.get(block)
        return b.reads if kind == "read" else b.writes

    def _buffer_index(self, block, spec, kind):
        if isinstance(spec, int):
            return spec
        if isinstance(spec, tuple) and len(spec) == 2:
            if spec[0] != kind:
                raise ShimGap(f"{spec[0]} buffer where the primitive takes a {kind} buffer")
            return spec[1]
        return self._find_buffer(block, spec, kind)

    def _buffer_kind_index(self, block, spec):
        if isinstance(spec, tuple) and len(spec) == 2:
            return spec[0], spec[1]
        if isinstance(spec, int):
            raise ShimGap("transform_layout with a bare buffer index")
        for kind in ("write", "read"):
            try:
                return kind, self._find_buffer(block, spec, kind)
            except ShimGap:
                continue
        raise ShimGap(f"transform_layout: buffer {spec!r} not accessed by the block")

    def _find_buffer(self, block, spec, kind):
        for k, r in enumerate(self._regions(block, kind)):
            if (isinstance(spec, str) and r.buffer.name == spec) or \
                    (isinstance(spec, Buffer) and r.buffer is spec):
                return k
        raise ShimGap(f"buffer {spec!r} is not among the block's {kind}s")

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        from schedules.primitive import PRIMITIVES
        if name in PRIMITIVES:
            # a primitive with TVM's name and argument order that the shim does not
            # translate (Cuvil's primitives take block names as TVM does)
            return functools.partial(_forward, getattr(self._sch, name), name)
        if name in TVM_METHODS:
            raise MissingPrimitive(f"Schedule.{name}: Cuvil has no such primitive")
        raise AttributeError(f"tvm.tir.Schedule has no attribute {name!r}")


#: the public methods of TVM v0.23's ``tir.Schedule``: any other name is no primitive
TVM_METHODS = frozenset((
    "mod state trace func_working_on work_on copy seed fork_seed show get get_sref "
    "remove_rv sample_categorical sample_perfect_tile sample_partitioned_tile "
    "sample_compute_location get_block get_loops get_child_blocks get_producers "
    "get_consumers get_output_blocks merge fuse split loop_partition reorder "
    "reorder_block_iter_var add_unit_loop parallel vectorize bind unroll cache_read "
    "cache_write reindex_cache_read reindex_cache_write cache_inplace cache_index reindex "
    "read_at write_at compute_at reverse_compute_at compute_inline reverse_compute_inline "
    "fuse_reduction_epilogue decompose_reduction rfactor storage_align set_scope "
    "unsafe_set_dtype blockize tensorize annotate unannotate transform_layout "
    "transform_block_layout set_axis_separator decompose_padding can_decompose_padding "
    "pad_einsum rolling_buffer enter_postproc unsafe_hide_buffer_access "
    "annotate_buffer_access").split())


def _forward(method, name, *args, **kwargs):
    _check_args(list(args) + list(kwargs.values()))
    from schedules.primitive import PRIMITIVES
    spec = PRIMITIVES[name].spec
    unknown = [k for k in kwargs if k not in spec.options]
    if unknown:
        raise ShimGap(f"Schedule.{name}({unknown[0]}=...): no Cuvil counterpart")
    return method(*args, **kwargs)


def _index_refusal_as_assertion(spec, call):
    """``call()``; when the buffer was named as a ``("read" | "write", i)`` pair and
    Cuvil's primitive refused ``i`` as out of range (its own check, a
    ScheduleArgumentError), the refusal is re-raised as AssertionError, which is where
    TVM's Python layer (``_normalize_buffer_arg``) reports it.  The shim checks no range
    itself."""
    try:
        return call()
    except S.errors.ScheduleArgumentError as err:
        if isinstance(spec, tuple) and "buffer_index" in str(err):
            raise AssertionError(str(err)) from err
        raise


def _block(b):
    if isinstance(b, str):
        return BlockRV(b)
    return b


def _int_or_none(f):
    from cuvil_tir.expr import IntImm
    return f.value if isinstance(f, IntImm) else f


def _known_intrin(name: str) -> bool:
    from cuvil_tir.tensor_intrin import TensorIntrin
    try:
        TensorIntrin.get(name)
        return True
    except Exception:
        return False


def _index_map(m):
    # TVM's IndexMap.from_func(fn) or the function itself: Cuvil takes the function
    fn = getattr(m, "_cuvil_fn", None)
    return fn if fn is not None else m

