"""GPU kernels in lowered IR: finding them, and normalising their thread bindings.

A *kernel* is a statement whose root is a ``thread_binding`` loop reached from the
function body through host statements only (sequences, ``Allocate`` of ``global``
buffers, serial loops, lets and conditions, which the host runs).  Inside a kernel
every loop bound to one tag stands for the same hardware index (``threadIdx.x`` …):

* :func:`normalize_thread_bindings` gives all loops of a tag in a kernel one variable
  and one extent, the launch dimension (the largest of them); a loop with a smaller
  extent gets the guard ``if tx < extent`` (sibling loops bound to one axis with
  different extents).  ``vthread`` loops become serial loops.  A tag bound twice in
  one nest, a symbolic ``threadIdx`` extent or more than 1024 threads per block is a
  ``LoweringError``.
* :func:`split_host_device` names each kernel (``<func>_kernel<k>``, the loop
  annotation ``cuda.kernel``) and checks that nothing else but host statements lies
  outside kernels.
* :func:`launch_dims` reads a kernel's grid and block dimensions.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((8,), "float32", "A")
    >>> i, j = T.var("i"), T.var("j")
    >>> k = T.For(i, T.const(0), T.const(8), "thread_binding",
    ...           T.BufferStore(A, T.const(1.0), (i,)), "threadIdx.x")
    >>> f = split_host_device(normalize_thread_bindings(T.PrimFunc([A], k)))
    >>> [kernel_name(s) for s in kernels(f.body)], launch_dims(f.body)["threadIdx.x"].value
    (['main_kernel0'], 8)
"""

from __future__ import annotations

from ..errors import LoweringError
from ..expr import IntImm, LT, Max, Var
from ..function import PrimFunc
from ..printer import to_text
from ..stmt import Allocate, Block, BlockRealize, For, IfThenElse, LetStmt, SeqStmt
from ..visitor import Mutator, substitute

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
MAX_THREADS = 1024


def is_thread_loop(s) -> bool:
    """A loop bound to a ``blockIdx``/``threadIdx`` axis.

    Example::

        >>> import cuvil_tir as T
        >>> is_thread_loop(T.For(T.var("i"), T.const(0), T.const(2), "serial", T.Evaluate(T.const(0))))
        False
    """
    return isinstance(s, For) and s.kind == "thread_binding" and not s.thread_tag.startswith("vthread")


def host_children(s) -> list:
    """The statements the host runs inside ``s`` (empty for a kernel or a leaf).

    Example::

        >>> import cuvil_tir as T
        >>> host_children(T.SeqStmt((T.Evaluate(T.const(0)),)))[0].value.value
        0
    """
    if isinstance(s, SeqStmt):
        return list(s.seq)
    if isinstance(s, IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    if isinstance(s, (LetStmt, Allocate)) or (isinstance(s, For) and not is_thread_loop(s)):
        return [s.body]
    return []


def kernels(body) -> list:
    """The kernel roots under ``body``, in program order.

    Example::

        >>> import cuvil_tir as T
        >>> kernels(T.Evaluate(T.const(0)))
        []
    """
    if is_thread_loop(body):
        return [body]
    out = []
    for c in host_children(body):
        out.extend(kernels(c))
    return out


def kernel_name(kernel: For) -> str | None:
    """The name :func:`split_host_device` gave ``kernel`` (None before it ran).

    Example::

        >>> import cuvil_tir as T
        >>> kernel_name(T.For(T.var("i"), T.const(0), T.const(2), "serial", T.Evaluate(T.const(0)))) is None
        True
    """
    return dict(kernel.annotations).get("cuda.kernel")


def thread_loops(kernel) -> list:
    """Every ``blockIdx``/``threadIdx`` loop inside ``kernel`` (itself included).

    Example::

        >>> import cuvil_tir as T
        >>> thread_loops(T.Evaluate(T.const(0)))
        []
    """
    out = []

    def walk(n):
        if isinstance(n, For):
            if is_thread_loop(n):
                out.append(n)
            walk(n.body)
        elif isinstance(n, SeqStmt):
            for c in n.seq:
                walk(c)
        elif isinstance(n, IfThenElse):
            walk(n.then_case)
            if n.else_case is not None:
                walk(n.else_case)
        elif isinstance(n, (LetStmt, Allocate)):
            walk(n.body)
        elif isinstance(n, BlockRealize):   # block-level IR (the interpreter runs it)
            walk(n.block)
        elif isinstance(n, Block):
            walk(n.body)
    walk(kernel)
    return out


def launch_dims(kernel) -> dict:
    """``{tag: extent}`` of a normalised kernel: every bound tag, the launch grid
    (``blockIdx.*``) and block (``threadIdx.*``) dimensions; missing tags are 1.

    Example::

        >>> import cuvil_tir as T
        >>> launch_dims(T.Evaluate(T.const(0)))["blockIdx.x"].value
        1
    """
    dims = {t: IntImm(1, "int32") for t in BLOCK_TAGS + THREAD_TAGS}
    for loop in thread_loops(kernel):
        dims[loop.thread_tag] = loop.extent
    return dims


def thread_vars(kernel) -> dict:
    """``{tag: Var}`` of a normalised kernel.

    Example::

        >>> thread_vars(None)
        {}
    """
    return {loop.thread_tag: loop.loop_var for loop in thread_loops(kernel)} if kernel else {}


class _Normalize(Mutator):
    """One kernel: one variable and one extent per tag, guards for smaller loops."""

    def __init__(self, func, kernel):
        self.func = func
        loops = thread_loops(kernel)
        self.var, self.extent = {}, {}
        for loop in loops:
            tag = loop.thread_tag
            if not (isinstance(loop.min, IntImm) and loop.min.value == 0):
                raise LoweringError(f"loop {loop.loop_var.name} bound to {tag} starts at "
                                    f"{loop.min}; a thread loop must start at 0:\n"
                                    + to_text(func, highlight=loop))
            if tag in THREAD_TAGS and not isinstance(loop.extent, IntImm):
                raise LoweringError(f"loop {loop.loop_var.name} bound to {tag} has the "
                                    f"symbolic extent {loop.extent}; the threads of a block "
                                    "are a constant count: split the loop by a constant "
                                    "and bind the inner loop:\n" + to_text(func, highlight=loop))
            self.var.setdefault(tag, loop.loop_var)
            old = self.extent.get(tag)
            if old is None or _structural_str(old) == _structural_str(loop.extent):
                self.extent[tag] = loop.extent
            elif isinstance(old, IntImm) and isinstance(loop.extent, IntImm):
                self.extent[tag] = IntImm(max(old.value, loop.extent.value), old.dtype)
            else:
                self.extent[tag] = Max(old, loop.extent)
        total = 1
        for tag in THREAD_TAGS:
            if tag in self.extent:
                total *= self.extent[tag].value
        if total > MAX_THREADS:
            raise LoweringError(f"a kernel of {func.name} has {total} threads per block "
                                f"({', '.join(f'{t}={self.extent[t]}' for t in THREAD_TAGS if t in self.extent)}); "
                                f"a CUDA block holds at most {MAX_THREADS}: bind smaller "
                                "loops to threadIdx and move the rest to blockIdx or a "
                                "serial loop")
        self.active: set = set()

    def visit_For(self, loop):
        if loop.kind == "thread_binding" and loop.thread_tag.startswith("vthread"):
            return For(loop.loop_var, loop.min, loop.extent, "serial", self.visit(loop.body),
                       None, loop.annotations)
        if not is_thread_loop(loop):
            return self.generic_visit(loop)
        tag = loop.thread_tag
        if tag in self.active:
            raise LoweringError(f"loop {loop.loop_var.name} is bound to {tag} inside "
                                f"another loop bound to {tag}; a thread axis can be bound "
                                "once per loop nest:\n" + to_text(self.func, highlight=loop))
        self.active.add(tag)
        try:
            var, launch = self.var[tag], self.extent[tag]
            body = loop.body if loop.loop_var is var else substitute(loop.body, {loop.loop_var: var})
            body = self.visit(body)
        finally:
            self.active.discard(tag)
        if _structural_str(loop.extent) != _structural_str(launch):
            body = IfThenElse(LT(var, loop.extent), body)
        return For(var, loop.min, launch, "thread_binding", body, tag, loop.annotations)


def _structural_str(e) -> str:
    return to_text(e)


class _PerKernel(Mutator):
    def __init__(self, fn):
        self.fn = fn

    def visit_For(self, loop):
        if is_thread_loop(loop):
            return self.fn(loop)
        return self.generic_visit(loop)


def normalize_thread_bindings(func: PrimFunc) -> PrimFunc:
    """One variable and one extent per thread tag in each kernel (module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> normalize_thread_bindings(f) is f
        True
    """
    body = _PerKernel(lambda k: _Normalize(func, k).visit(k)).visit(func.body)
    return func if body is func.body else func.with_body(body)


def _host_check(func, s) -> None:
    if is_thread_loop(s):
        return
    kids = host_children(s)
    if isinstance(s, Allocate) and s.buffer.scope != "global":
        raise LoweringError(f"buffer {s.buffer.name} in scope {s.buffer.scope!r} is "
                            "allocated outside every kernel; use it only under loops bound "
                            "to blockIdx/threadIdx:\n" + to_text(func, highlight=s))
    if not kids and not (isinstance(s, SeqStmt)):
        raise LoweringError(f"this statement of {func.name} runs on the host, outside "
                            "every loop bound to blockIdx/threadIdx; bind its loops (a "
                            "CUDA build runs all computation in kernels):\n"
                            + to_text(func, highlight=s))
    for c in kids:
        _host_check(func, c)


def split_host_device(func: PrimFunc) -> PrimFunc:
    """Name every kernel of ``func`` (annotation ``cuda.kernel``) and check that only
    host statements lie outside kernels.  Kernel parameters are computed by the
    code generator from what each kernel uses.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "float32", "A")
        >>> try:
        ...     split_host_device(T.PrimFunc([A], T.BufferStore(A, T.const(0.0), (T.const(0),))))
        ... except T.LoweringError as err:
        ...     print(str(err).split(",")[0])
        [CVL-E104] this statement of main runs on the host
    """
    _host_check(func, func.body)
    counter = [0]

    def name(k):
        ann = dict(k.annotations)
        ann["cuda.kernel"] = f"{func.name}_kernel{counter[0]}"
        counter[0] += 1
        return For(k.loop_var, k.min, k.extent, k.kind, k.body, k.thread_tag, ann)
    body = _PerKernel(name).visit(func.body)
    return func if body is func.body else func.with_body(body)


def kernel_free_vars(kernel) -> list:
    """Scalar variables a kernel reads but does not define (sizes, host loop vars),
    in first-use order.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.var("n")
        >>> [v.name for v in kernel_free_vars(T.Evaluate(n + 1))]
        ['n']
    """
    from ..visitor import Visitor
    defined, out, seen = set(), [], set()

    class _V(Visitor):
        def visit_For(self, s):
            defined.add(id(s.loop_var))
            self.generic_visit(s)

        def visit_LetStmt(self, s):
            defined.add(id(s.var))
            self.generic_visit(s)

        def visit_Let(self, e):
            defined.add(id(e.var))
            self.generic_visit(e)

        def visit_buffer(self, buf):
            for d in buf.shape:
                self.visit(d)

        def visit_Var(self, v):
            if id(v) not in defined and id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    _V().visit(kernel)
    return [v for v in out if id(v) not in defined and isinstance(v, Var)]


__all__ = ["BLOCK_TAGS", "THREAD_TAGS", "host_children", "is_thread_loop", "kernel_free_vars",
           "kernel_name", "kernels", "launch_dims", "normalize_thread_bindings",
           "split_host_device", "thread_loops", "thread_vars"]
