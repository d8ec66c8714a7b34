"""IRModule: what lowering produces -- named functions, each with a calling convention.

A lowered program is more than one function: the host entry that a caller runs, the
parallel tasks outlined from its ``parallel`` loops (run by a thread pool), later GPU
kernels.  Each function's attribute ``calling_conv`` says which (:data:`CALLING_CONVS`);
the module attribute ``entry`` names the function a caller runs.

The host reaches a task through ``T.parallel_launch("main_par0", lo, extent, A, B, n)``:
run ``main_par0(A, B, n, i)`` for every ``i`` in ``[lo, lo + extent)``, in any order
and concurrently.  A task's parameters are the launch's arguments then the iteration
index; its buffers never overlap another buffer argument.  It reaches a device kernel
through ``T.device_launch("main_kernel0", {"blockIdx.x": g, "threadIdx.x": 128}, A, n)``:
run the kernel over that grid of blocks and threads (axes a target declares, extents
in the host's values) with the arguments ``A, n``.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((4,), "float32", "A")
    >>> f = T.PrimFunc([A], T.BufferStore(A, T.float32(1), (T.const(0),)))
    >>> mod = T.IRModule.from_func(f)
    >>> mod.names, mod.entry.attr("calling_conv")
    (('main',), 'host')
"""

from __future__ import annotations

from . import dtype as D
from .errors import CodegenError, DTypeError, LoweringError
from .expr import Call, IntImm, StringImm, as_expr
from .function import PrimFunc
from .node import Node, node, same
from .op import call_args
from .stmt import BufferRegion, _annotations

#: calling conventions: a function the user's caller runs (``host``), one iteration
#: of an outlined parallel loop (``parallel_task``), a GPU kernel (``device_kernel``)
CALLING_CONVS = ("host", "parallel_task", "device_kernel")
#: the function attribute holding a function's calling convention
CONV_ATTR = "calling_conv"
#: PrimFunc attributes a module lacks (a helpful AttributeError names ``mod.entry``)
_FUNC_ONLY = ("body", "params", "buffers", "buffer_map", "with_body", "with_attr")
#: the op of ``T.parallel_launch``
LAUNCH_OP = "parallel_launch"
#: the op of ``T.device_launch``
DEVICE_LAUNCH_OP = "device_launch"


def calling_conv(func: PrimFunc) -> str:
    """The calling convention of ``func`` (``host`` when it has none).

    Example::

        >>> import cuvil_tir as T
        >>> calling_conv(T.PrimFunc([], T.Evaluate(T.const(0))))
        'host'
    """
    return func.attr(CONV_ATTR, "host")


@node
class IRModule(Node):
    """Named PrimFuncs (unique ``global_symbol`` names, in order) plus attributes.
    ``functions`` may also be a dict ``{name: func}`` (TVM's spelling), which names
    each function.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0))).with_attr("global_symbol", "f")
        >>> mod = T.IRModule((f,), {"entry": "f"})
        >>> mod["f"] is mod.entry
        True
        >>> T.IRModule({"g": f}).names
        ('g',)
    """

    functions: tuple
    attrs: tuple = ()

    def __post_init__(self):
        funcs = self.functions
        if isinstance(funcs, dict):
            funcs = [f.with_attr("global_symbol", name) if isinstance(f, PrimFunc) and
                     f.name != name else f for name, f in funcs.items()]
        object.__setattr__(self, "functions", tuple(funcs))
        object.__setattr__(self, "attrs", _annotations(self.attrs))
        names = set()
        for f in self.functions:
            if not isinstance(f, PrimFunc):
                raise LoweringError(f"IRModule: functions are PrimFuncs, found "
                                    f"{type(f).__name__}")
            if f.name in names:
                raise LoweringError(f"IRModule: two functions are named {f.name!r}; give "
                                    "each a distinct global_symbol")
            names.add(f.name)
            conv = calling_conv(f)
            if conv not in CALLING_CONVS:
                raise LoweringError(f"IRModule: function {f.name!r} has calling_conv "
                                    f"{conv!r}; expected one of {', '.join(CALLING_CONVS)}")
        if not self.functions:
            raise LoweringError("IRModule: a module needs at least one function")
        entry = self.attr("entry")
        if entry is not None and entry not in names:
            raise LoweringError(f"IRModule: the entry {entry!r} is not one of its "
                                f"functions ({', '.join(sorted(names))})")

    __hash__ = Node.__hash__

    def __getattr__(self, name):
        # T.lower used to return the host PrimFunc: say where its attributes went
        if name in _FUNC_ONLY:
            raise AttributeError(f"an IRModule has no {name!r}: it is a module of "
                                 f"functions ({', '.join(self.names)}); use mod.entry (the "
                                 f"host function) or mod['<name>'], e.g. mod.entry.{name}")
        raise AttributeError(name)

    @staticmethod
    def from_func(func: PrimFunc) -> "IRModule":
        """A module of one host function, its entry.

        Example::

            >>> import cuvil_tir as T
            >>> T.IRModule.from_func(T.PrimFunc([], T.Evaluate(T.const(0)))).attr("entry")
            'main'
        """
        if not isinstance(func, PrimFunc):
            raise LoweringError(f"IRModule.from_func: expected a PrimFunc, found "
                                f"{type(func).__name__}")
        if CONV_ATTR not in dict(func.attrs):
            func = func.with_attr(CONV_ATTR, "host")
        return IRModule((func,), {"entry": func.name})

    @property
    def name(self) -> str:
        """The entry's name (what reports and dumps call the module)."""
        return self.entry.name

    @property
    def names(self) -> tuple:
        """The function names, in order."""
        return tuple(f.name for f in self.functions)

    @property
    def entry(self) -> PrimFunc:
        """The function a caller runs: attribute ``entry``, else the first host one."""
        name = self.attr("entry")
        if name is not None:
            return self[name]
        for f in self.functions:
            if calling_conv(f) == "host":
                return f
        return self.functions[0]

    def attr(self, key: str, default=None):
        """Look up one module attribute."""
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def __getitem__(self, name: str) -> PrimFunc:
        for f in self.functions:
            if f.name == name:
                return f
        raise LoweringError(f"IRModule: no function named {name!r}; it has "
                            f"{', '.join(self.names)}")

    def __contains__(self, name) -> bool:
        return any(f.name == name for f in self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def __iter__(self):
        return iter(self.functions)

    def with_function(self, func: PrimFunc) -> "IRModule":
        """A copy with ``func`` replacing the function of the same name (or added).

        Example::

            >>> import cuvil_tir as T
            >>> mod = T.IRModule.from_func(T.PrimFunc([], T.Evaluate(T.const(0))))
            >>> mod.with_function(mod.entry.with_attr("k", 1)).entry.attr("k")
            1
        """
        funcs = list(self.functions)
        for k, f in enumerate(funcs):
            if f.name == func.name:
                funcs[k] = func
                return IRModule(funcs, self.attrs)
        return IRModule(funcs + [func], self.attrs)

    def with_entry(self, func: PrimFunc) -> "IRModule":
        """A copy whose entry is ``func`` (renamed entries keep ``entry`` right).

        Example::

            >>> import cuvil_tir as T
            >>> mod = T.IRModule.from_func(T.PrimFunc([], T.Evaluate(T.const(0))))
            >>> mod.with_entry(mod.entry.with_attr("global_symbol", "g")).names
            ('g',)
        """
        old = self.entry.name
        funcs = [func if f.name == old else f for f in self.functions]
        attrs = dict(self.attrs)
        attrs["entry"] = func.name
        return IRModule(funcs, attrs)

    def map_functions(self, fn) -> "IRModule":
        """Apply ``fn`` (PrimFunc -> PrimFunc) to every function; the same module if
        nothing changed.

        Example::

            >>> import cuvil_tir as T
            >>> mod = T.IRModule.from_func(T.PrimFunc([], T.Evaluate(T.const(0))))
            >>> mod.map_functions(lambda f: f) is mod
            True
        """
        funcs = tuple(fn(f) for f in self.functions)
        for f in funcs:
            if not isinstance(f, PrimFunc):
                raise LoweringError(f"IRModule.map_functions: expected a PrimFunc back, "
                                    f"found {type(f).__name__}")
        if all(a is b for a, b in zip(funcs, self.functions)):
            return self
        entry = self.attr("entry")
        attrs = dict(self.attrs)
        if entry is not None:
            # a pass may rename a function: keep the entry pointing at the same slot
            attrs["entry"] = funcs[self.names.index(entry)].name
        return IRModule(funcs, attrs)


def as_module(ir) -> IRModule:
    """``ir`` as a module: a module unchanged, a PrimFunc as :meth:`IRModule.from_func`.

    Example::

        >>> import cuvil_tir as T
        >>> len(as_module(T.PrimFunc([], T.Evaluate(T.const(0)))))
        1
    """
    if isinstance(ir, IRModule):
        return ir
    return IRModule.from_func(ir)


def single_function(ir, target: str) -> PrimFunc:
    """The one function of ``ir`` (a PrimFunc, or a module holding only its entry), for
    a code generator that prints one function; more functions are a ``CodegenError``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> single_function(T.IRModule.from_func(f), "c").name
        'main'
    """
    if isinstance(ir, PrimFunc):
        return ir
    if not isinstance(ir, IRModule):
        raise CodegenError(f"{target} codegen: expected a lowered IRModule or PrimFunc, "
                           f"found {type(ir).__name__}")
    if len(ir) != 1:
        others = ", ".join(f"{f.name} ({calling_conv(f)})" for f in ir if f is not ir.entry)
        raise CodegenError(f"{target} codegen: the module has functions besides its entry "
                           f"{ir.entry.name!r}: {others}; this target prints one function "
                           "(lower with its own pipeline: T.lower(func, target))")
    return ir.entry


def parallel_launch(task: str, lo, extent, *args) -> Call:
    """Run the module's ``parallel_task`` function ``task`` once per index of
    ``[lo, lo + extent)`` with ``args`` then the index; a statement through
    ``T.evaluate``.  Arguments are whole buffers or scalar expressions.  Returns the
    first non-zero status of a task (int32), which the host returns at once.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> print(T.parallel_launch("main_par0", 0, 8, A, T.size_var("n")))
        T.parallel_launch("main_par0", 0, 8, A, n)
    """
    if not isinstance(task, str) or not task.isidentifier():
        raise DTypeError(f"T.parallel_launch: the task name must be an identifier, "
                         f"found {task!r}")
    lo, extent = as_expr(lo), as_expr(extent)
    for what, e in (("start", lo), ("extent", extent)):
        if not D.is_int(e.dtype) or D.lanes(e.dtype) != 1:
            raise DTypeError(f"T.parallel_launch({task!r}): the {what} must be a scalar "
                             f"integer, found {e.dtype}")
    vals = call_args(f"T.parallel_launch({task!r})", args)
    for k, a in enumerate(vals):
        if isinstance(a, BufferRegion) and not is_whole(a):
            raise DTypeError(f"T.parallel_launch({task!r}): argument {k} must be a whole "
                             f"buffer, found a region of {a.buffer.name}")
    return Call("int32", LAUNCH_OP, (StringImm(task), lo, extent, *vals))


def device_launch(kernel: str, dims: dict, *args) -> Call:
    """Run the module's ``device_kernel`` function ``kernel`` over the launch
    dimensions ``dims`` (``{axis: extent}``, such as ``{"blockIdx.x": g,
    "threadIdx.x": 128}``; axes left out are 1) with ``args`` (whole buffers or
    scalar expressions, the kernel's parameters in order); a statement through
    ``T.evaluate``.  Returns a status (int32): non-zero when the launch failed.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> n = T.size_var("n")
        >>> print(T.device_launch("k", {"blockIdx.x": (n + 7) // 8, "threadIdx.x": 8}, A, n))
        T.device_launch("k", {"blockIdx.x": (n + 7) // 8, "threadIdx.x": 8}, A, n)
    """
    who = f"T.device_launch({kernel!r})"
    if not isinstance(kernel, str) or not kernel.isidentifier():
        raise DTypeError(f"T.device_launch: the kernel name must be an identifier, "
                         f"found {kernel!r}")
    if not isinstance(dims, dict):
        raise DTypeError(f"{who}: the launch dimensions are a dict {{axis: extent}}, "
                         f"found {type(dims).__name__}")
    pairs = []
    for axis, extent in dims.items():
        extent = as_expr(extent)
        if not isinstance(axis, str) or not D.is_int(extent.dtype) or D.lanes(extent.dtype) != 1:
            raise DTypeError(f"{who}: each launch dimension is an axis name and a scalar "
                             f"integer extent, found {axis!r}: {extent.dtype}")
        pairs += [StringImm(axis), extent]
    vals = call_args(who, args)
    for k, a in enumerate(vals):
        if isinstance(a, BufferRegion) and not is_whole(a):
            raise DTypeError(f"{who}: argument {k} must be a whole buffer, found a "
                             f"region of {a.buffer.name}")
    return Call("int32", DEVICE_LAUNCH_OP, (StringImm(kernel), IntImm(len(dims), "int32"),
                                            *pairs, *vals))


def device_launch_parts(call: Call) -> tuple:
    """``(kernel name, {axis: extent}, args)`` of a ``T.device_launch`` call; buffer
    arguments come back as buffers.

    Example::

        >>> import cuvil_tir as T
        >>> name, dims, args = device_launch_parts(T.device_launch("k", {"threadIdx.x": 4}))
        >>> name, dims["threadIdx.x"].value, args
        ('k', 4, ())
    """
    name, count, *rest = call.args
    n = 2 * count.value
    dims = {rest[k].value: rest[k + 1] for k in range(0, n, 2)}
    return (name.value, dims,
            tuple(a.buffer if isinstance(a, BufferRegion) else a for a in rest[n:]))


def is_device_launch(e) -> bool:
    """True for a ``T.device_launch`` call.

    Example::

        >>> import cuvil_tir as T
        >>> is_device_launch(T.device_launch("k", {})), is_device_launch(T.const(0))
        (True, False)
    """
    return isinstance(e, Call) and e.op == DEVICE_LAUNCH_OP


def is_whole(region: BufferRegion) -> bool:
    """True when ``region`` covers its whole buffer (``BufferRegion.full``).

    Example::

        >>> import cuvil_tir as T
        >>> is_whole(T.BufferRegion.full(T.decl_buffer((4,), "float32", "A")))
        True
    """
    full = BufferRegion.full(region.buffer)
    return same(full.region, region.region)


def launch_parts(call: Call) -> tuple:
    """``(task name, lo, extent, args)`` of a ``T.parallel_launch`` call; buffer
    arguments come back as buffers.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> name, lo, ext, args = launch_parts(T.parallel_launch("t", 0, 8, A))
        >>> name, ext.value, args[0] is A
        ('t', 8, True)
    """
    name, lo, extent, *args = call.args
    return (name.value, lo, extent,
            tuple(a.buffer if isinstance(a, BufferRegion) else a for a in args))


def is_launch(e) -> bool:
    """True for a ``T.parallel_launch`` call.

    Example::

        >>> import cuvil_tir as T
        >>> is_launch(T.parallel_launch("t", 0, 4)), is_launch(T.const(0))
        (True, False)
    """
    return isinstance(e, Call) and e.op == LAUNCH_OP
