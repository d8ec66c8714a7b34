"""Tensor intrinsics: a ``desc`` PrimFunc saying what a hardware instruction computes,
and an ``impl`` PrimFunc saying what to emit instead (TVM's ``TensorIntrin``).

``tensorize`` matches a loop nest against ``desc`` (up to renaming) and replaces it by
``impl`` with impl's buffers bound to the matched regions.  An intrinsic that needs
ISA extensions (``requires``: ``("avx512vnni",)``, or alternatives
``(("avxvnni",), ("avx512vnni", "avx512vl"))``) is :meth:`TensorIntrin.available` only
on targets whose machine (``machine(target).features``, from ``mcpu``/``mattr``)
declares them; :meth:`TensorIntrin.check` says which one is missing.  Both functions take the
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
from .errors import (ScheduleArgumentError, TargetError, UnknownTensorIntrinError,
                     schedule_error)
from . import ops
from .expr import Call
from .ops.spelling import has_backend
from .visitor import post_order_visit
from .target import as_target


class TensorIntrin:
    """A registered tensor intrinsic: ``name``, ``desc`` and ``impl`` PrimFuncs.

    Example::

        >>> TensorIntrin("example.copy4", None, None)
        TensorIntrin('example.copy4')
    """

    _REGISTRY: dict = {}
    #: names known from another compiler (TVM) that Cuvil does not back: name -> why
    _DECLINED: dict = {}

    def __init__(self, name: str, desc: PrimFunc, impl: PrimFunc, requires=()):
        self.name = name
        self.desc = desc
        self.impl = impl
        self.requires = _alternatives(requires)

    def __repr__(self):
        return f"TensorIntrin({self.name!r})"

    @classmethod
    def register(cls, name: str, desc_func: PrimFunc, impl_func: PrimFunc,
                 override: bool = False, requires=()) -> "TensorIntrin":
        """Declare the intrinsic ``name``; checks that desc and impl agree.
        ``requires``: the ISA extensions a target must declare to use it (module
        doc; :meth:`available`).

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
        try:
            _alternatives(requires)
        except ValueError as err:
            raise schedule_error(ScheduleArgumentError, where, f"{name}: {err}") from None
        intrin = cls(name, desc_func, impl_func, requires)
        cls._REGISTRY[name] = intrin
        cls._DECLINED.pop(name, None)
        return intrin

    @classmethod
    def decline(cls, name: str, reason: str) -> None:
        """Declare ``name`` an intrinsic of another compiler (TVM's) that Cuvil does not
        back: :meth:`get` then refuses it saying ``reason``, instead of "unknown"
        (``allow_missing=True`` still gives None).  A later :meth:`register` of the
        name backs it.

        Example::

            >>> TensorIntrin.decline("example.declined", "no such instruction here")
            >>> try:
            ...     TensorIntrin.get("example.declined")
            ... except ValueError as err:
            ...     print(err.code, "no such instruction here" in err.message)
            CVL-E103 True
        """
        if name not in cls._REGISTRY:
            cls._DECLINED[name] = reason

    def missing(self, target) -> str | None:
        """None when ``target`` declares the ISA extensions this intrinsic
        ``requires``, else which are missing, in words.

        Example::

            >>> TensorIntrin("x", None, None, requires=("avx512vnni",)).missing(
            ...     "llvm -mcpu=haswell")
            'needs avx512vnni; the target declares none of them'
            >>> TensorIntrin("x", None, None).missing("llvm -mcpu=haswell") is None
            True
        """
        t = as_target(target)
        unspelled = _unspelled(self.impl, t.kind_obj.name)
        if unspelled:
            return (f"uses {', '.join(unspelled)}, which the {t.kind_obj.name} backend "
                    "does not write")
        if not self.requires:
            return None
        have = {f[1:] if f[:1] == "+" else f for f in t.kind_obj.machine(t).features
                if f[:1] != "-"}
        if any(set(alt) <= have for alt in self.requires):
            return None
        wanted = {x for alt in self.requires for x in alt}
        found = sorted(wanted & have)
        alts = ", or ".join(" with ".join(alt) for alt in self.requires)
        return f"needs {alts}; the target declares " + \
            (", ".join(found) if found else "none of them")

    def available(self, target) -> bool:
        """Whether ``target`` can use this intrinsic (:meth:`missing` is None).

        Example::

            >>> TensorIntrin("x", None, None, requires=("avx512vnni",)).available(
            ...     "llvm -mcpu=znver4")
            True
        """
        return self.missing(target) is None

    def check(self, target) -> None:
        """Raise a ``TargetError`` (``CVL-E106``) naming the missing ISA extension when
        ``target`` cannot use this intrinsic.

        Example::

            >>> from cuvil_tir.errors import TargetError
            >>> try:
            ...     TensorIntrin("x86.demo", None, None, requires=("avx512bf16",)).check(
            ...         "llvm -mcpu=icelake-server")
            ... except TargetError as err:
            ...     print(err.code)
            CVL-E106
        """
        why = self.missing(target)
        if why is not None:
            raise TargetError(f"tensor intrinsic {self.name!r} {why} (target "
                              f"{as_target(target)}); build for a CPU that has it "
                              "(mcpu=... or mattr='+...' on llvm, -march=... or -m... "
                              "in the c target's cflags)")

    @classmethod
    def available_names(cls, target) -> list:
        """Names of the registered intrinsics ``target`` can use, sorted.

        Example::

            >>> import cuvil_tir as T
            >>> f = T.PrimFunc([T.decl_buffer((4,), "int8", "A")], T.Evaluate(T.const(0)))
            >>> _ = TensorIntrin.register("example.vnni_only", f, f, override=True,
            ...                           requires=("avx512vnni",))
            >>> [n in TensorIntrin.available_names(f"llvm -mcpu={cpu}")
            ...  for n, cpu in [("example.vnni_only", "haswell"),
            ...                 ("example.vnni_only", "icelake-server")]]
            [False, True]
        """
        return [n for n in sorted(cls._REGISTRY) if cls._REGISTRY[n].available(target)]

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
            if name in cls._DECLINED:
                raise schedule_error(UnknownTensorIntrinError, "tensorize",
                                     f"the tensor intrinsic {name!r} (TVM's) is not "
                                     f"backed by Cuvil: {cls._DECLINED[name]}")
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

def _unspelled(impl, backend: str) -> list:
    """The registered ops ``impl`` calls that ``backend`` has no spelling for, sorted:
    an intrinsic whose instruction the backend cannot write is not available there."""
    if not isinstance(impl, PrimFunc) or not has_backend(backend):
        return []
    found = set()

    def look(n):
        if isinstance(n, Call) and ops.has_op(n.op):
            spell = ops.find_spelling(backend, n.op)
            if spell is None or isinstance(spell, ops.Unsupported):
                found.add(n.op)
    post_order_visit(impl.body, look)
    return sorted(found)


def _alternatives(requires) -> tuple:
    """``requires`` as a tuple of alternatives, each a tuple of extension names."""
    if isinstance(requires, str):
        requires = (requires,)
    req = tuple(requires) if isinstance(requires, (tuple, list)) else None
    if req is None:
        pass
    elif all(isinstance(x, str) for x in req):
        return (req,) if req else ()
    elif all(isinstance(alt, (tuple, list)) and alt and
             all(isinstance(x, str) for x in alt) for alt in req):
        return tuple(tuple(alt) for alt in req)
    raise ValueError(f"requires must be extension names ('avx512vnni', ...) or a tuple of "
                     f"alternatives (('avxvnni',), ('avx512vnni', 'avx512vl')), found "
                     f"{requires!r}")


__all__ = ["TensorIntrin"]
