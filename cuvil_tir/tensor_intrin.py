"""Tensor intrinsics: a ``desc`` PrimFunc saying what a hardware instruction computes,
and an ``impl`` PrimFunc saying what to emit instead (TVM's ``TensorIntrin``).

``tensorize`` matches a loop nest against ``desc`` (up to renaming) and replaces it by
``impl`` with impl's buffers bound to the matched regions.  Both functions take the
same buffer parameters, in the same order, with the same shapes and dtypes.  ``desc``
describes an *update* (``C = C + ...``): its blocks carry no init; the scheduled
block's init (moved out by ``blockize``) is kept around the instruction.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((4,), "float32", "A")
    >>> B = T.decl_buffer((4,), "float32", "B")
    >>> from cuvil_tir.stmt import For, BlockRealize, Block, IterVar, Range, BufferStore
    >>> i, vi = T.var("i"), T.var("vi")
    >>> blk = Block("copy", (IterVar(vi, Range.from_extent(4)),), (), (),
    ...             BufferStore(B, A[vi], (vi,)))
    >>> desc = T.PrimFunc((A, B), For(i, T.const(0), T.const(4), "serial",
    ...                   BlockRealize((i,), T.const(True), blk)))
    >>> TensorIntrin.register("example.copy4", desc, desc, override=True).name
    'example.copy4'
    >>> TensorIntrin.get("example.copy4").desc is desc
    True
"""

from __future__ import annotations

from .buffer import Buffer
from .function import PrimFunc
from .stmt import BlockRealize

from .analysis import tree
from .errors import ScheduleArgumentError, UnknownTensorIntrinError, schedule_error


class TensorIntrin:
    """A registered tensor intrinsic: ``name``, ``desc`` and ``impl`` PrimFuncs.

    Example::

        >>> TensorIntrin("example.copy4", None, None)
        TensorIntrin('example.copy4')
    """

    _REGISTRY: dict = {}

    def __init__(self, name: str, desc: PrimFunc, impl: PrimFunc):
        self.name = name
        self.desc = desc
        self.impl = impl

    def __repr__(self):
        return f"TensorIntrin({self.name!r})"

    @classmethod
    def register(cls, name: str, desc_func: PrimFunc, impl_func: PrimFunc,
                 override: bool = False) -> "TensorIntrin":
        """Declare the intrinsic ``name``; checks that desc and impl agree.

        Example::

            >>> from cuvil_tir.errors import ScheduleError
            >>> try:
            ...     TensorIntrin.register("example.none", None, None)
            ... except ScheduleError as err:
            ...     print(err.message)
            TensorIntrin.register: example.none: desc must be a PrimFunc, found NoneType
        """
        where = "TensorIntrin.register"
        if name in cls._REGISTRY and not override:
            raise schedule_error(ScheduleArgumentError, where,
                                 f"an intrinsic named {name!r} is already registered; "
                                 "choose another name or pass override=True")
        for what, f in (("desc", desc_func), ("impl", impl_func)):
            if not isinstance(f, PrimFunc):
                raise schedule_error(ScheduleArgumentError, where,
                                     f"{name}: {what} must be a PrimFunc, found "
                                     f"{type(f).__name__}")
            for p in f.params:
                if not isinstance(p, Buffer):
                    raise schedule_error(ScheduleArgumentError, where,
                                         f"{name}: {what} parameter {p.name!r} is a "
                                         "scalar; intrinsic parameters are buffers")
        dp, ip = desc_func.params, impl_func.params
        if len(dp) != len(ip):
            raise schedule_error(ScheduleArgumentError, where,
                                 f"{name}: desc has {len(dp)} buffer parameters but impl "
                                 f"has {len(ip)}; they must take the same buffers")
        for k, (a, b) in enumerate(zip(dp, ip)):
            same_shape = len(a.shape) == len(b.shape) and all(
                getattr(x, "value", x) == getattr(y, "value", y)
                for x, y in zip(a.shape, b.shape))
            if a.dtype != b.dtype or not same_shape:
                raise schedule_error(ScheduleArgumentError, where,
                                     f"{name}: parameter {k} differs: desc {a.name} "
                                     f"{a.dtype}{list(a.shape)} vs impl {b.name} "
                                     f"{b.dtype}{list(b.shape)}")
        for _, s in tree.walk(desc_func):
            if isinstance(s, BlockRealize) and s.block.init is not None:
                raise schedule_error(ScheduleArgumentError, where,
                                     f"{name}: desc block {s.block.name!r} has an init; "
                                     "a desc describes the update C = C + ... only "
                                     "(the scheduled block keeps its own init)")
        intrin = cls(name, desc_func, impl_func)
        cls._REGISTRY[name] = intrin
        return intrin

    @classmethod
    def get(cls, name: str, allow_missing: bool = False) -> "TensorIntrin | None":
        """The intrinsic ``name``.  If absent: None with ``allow_missing=True`` (TVM's
        option, to probe for an intrinsic), else ``UnknownTensorIntrinError`` (a
        ``ScheduleError`` and a ``ValueError``) listing the known ones.

        Example::

            >>> try:
            ...     TensorIntrin.get("example.missing")
            ... except ValueError as err:
            ...     print(err.code)
            CVL-E103
            >>> TensorIntrin.get("example.missing", allow_missing=True) is None
            True
        """
        if not isinstance(allow_missing, bool):
            raise schedule_error(ScheduleArgumentError, "TensorIntrin.get",
                                 f"allow_missing: expected True or False, found "
                                 f"{allow_missing!r}")
        intrin = cls._REGISTRY.get(name)
        if intrin is None:
            if allow_missing:
                return None
            raise schedule_error(UnknownTensorIntrinError, "tensorize",
                                 f"no tensor intrinsic named {name!r}; registered: "
                                 f"{sorted(cls._REGISTRY)} (declare one with "
                                 "S.TensorIntrin.register(name, desc, impl), or probe "
                                 "with TensorIntrin.get(name, allow_missing=True))")
        return intrin

    @classmethod
    def names(cls) -> list:
        """Names of every registered intrinsic, sorted.

        Example::

            >>> isinstance(TensorIntrin.names(), list)
            True
        """
        return sorted(cls._REGISTRY)

__all__ = ["TensorIntrin"]
