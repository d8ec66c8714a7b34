"""The CUDA host program as C: the lowered host function, compiled by the system C
compiler and loaded with ctypes; it launches the kernels through a device table.

The host function of a lowered ``cuda`` module (:func:`targets.cuda.cuda_pipeline`)
holds only host statements: serial loops, lets, conditions, run-time checks,
``global`` temporaries and ``T.device_launch`` calls with their dimensions as
expressions.  :class:`HostPrinter` prints it with the C printer base; what touches
the device goes through one table the runtime fills, :data:`DEVICE_TABLE`:

* ``launch``: ``cuLaunchKernel``'s signature -- the runtime passes the CUDA driver's
  own function, a test passes a recorder (:mod:`targets.cuda.launcher`);
* ``kernels``: the kernels' handles (``CUfunction``), in the program's kernel order;
* ``stream``; ``alloc``/``release`` for ``global`` temporaries (``ctx`` is theirs);
* ``error``: the driver's error code when a launch failed;
* ``encode_tiled``: ``cuTensorMapEncodeTiled``'s signature, which encodes each
  ``CUtensorMap`` parameter of a kernel that copies through the tensor engine
  (:mod:`targets.cuda.tma`) before its launch.

The function is ``int32_t name(const cvl_device *dev, <buffers as device pointers>,
<scalars>, <sizes as int64_t>)`` and returns 0, ``STATUS_ALLOC_FAILED`` (a
temporary could not be allocated), ``STATUS_CHECK_FAILED`` (a ``T.assert_`` of the
IR failed: its values are in the error slot, :mod:`targets.runtime.checks`),
:data:`STATUS_LAUNCH_FAILED` or :data:`STATUS_ENCODE_FAILED`; every path out releases the live temporaries.  Reading
device memory on the host is a ``CodegenError``.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((8,), "float32", "A")
    >>> k = T.PrimFunc([T.decl_buffer((8,), "float32", "A")], T.Evaluate(T.const(0)),
    ...                {"global_symbol": "f_kernel0", "calling_conv": "device_kernel"})
    >>> host = T.PrimFunc([A], T.Evaluate(T.device_launch("f_kernel0", {"threadIdx.x": 8}, A)))
    >>> src = HostPrinter(["f_kernel0"], {"f_kernel0": ["float *"]}).print_function(host, "f")
    >>> print(src[src.index("int32_t f("):].split("\\n\\n")[0])  # doctest: +NORMALIZE_WHITESPACE
    int32_t f(const cvl_device *cvl_dev, float *restrict A) {
        int32_t cvl_status = 0;
        { /* launch f_kernel0 */
            void *cvl_args[] = {(void *)&A};
            int32_t cvl_err = cvl_dev->launch(cvl_dev->kernels[0], 1u, 1u, 1u, 8u, 1u, 1u, 0u, cvl_dev->stream, cvl_args, NULL);
            if (cvl_err != 0) {
                cvl_dev->error[0] = cvl_err;
                return 3;
            }
        }
        return cvl_status;
    }
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CodegenError
from cuvil_tir.ir_module import device_launch_parts, is_device_launch
from cuvil_tir.transform.gpu_threads import launch_shape
from cuvil_tir.visitor import substitute

from ..cstyle import CPrinter
from ..cstyle.printer import STATUS_ALLOC_FAILED

#: the status the host returns when a kernel launch failed (the driver's code is in
#: the table's ``error``)
STATUS_LAUNCH_FAILED = 3
#: the status when encoding a tensor map failed (the driver's code is in ``error``)
STATUS_ENCODE_FAILED = 4

#: the device table every host program takes (see the module docstring)
DEVICE_TABLE = """\
typedef int (*cvl_launch_fn)(void *kernel, uint32_t gx, uint32_t gy, uint32_t gz,
                             uint32_t bx, uint32_t by, uint32_t bz, uint32_t shared_bytes,
                             void *stream, void **params, void **extra);
typedef struct {
    cvl_launch_fn launch;
    void **kernels;
    void *stream;
    int32_t (*alloc)(void *ctx, int64_t nbytes, void **ptr);
    int32_t (*release)(void *ctx, void *ptr);
    void *ctx;
    int32_t *error;
    int32_t (*encode_tiled)(void *map, int32_t dtype, uint32_t rank, void *address,
                            const uint64_t *dims, const uint64_t *strides,
                            const uint32_t *box, const uint32_t *elem_strides,
                            int32_t interleave, int32_t swizzle, int32_t l2, int32_t fill);
} cvl_device;
typedef struct { _Alignas(64) uint64_t opaque[16]; } cvl_tmap;"""


class HostPrinter(CPrinter):
    """The host function of a lowered ``cuda`` module as C (module docstring).

    ``kernels``: the kernel names in the program's order (their index in the table);
    ``param_types``: per kernel, the C type of each parameter (what a launch passes);
    ``dyn_shared``: per kernel, its dynamic shared memory in bytes; ``tensor_maps``:
    per kernel taking ``CUtensorMap`` parameters, ``(its parameters, its
    TensorMaps)``.

    Example::

        >>> HostPrinter([], {}).lang
        'cuda host'
    """

    lang = "cuda host"
    # the host passes device pointers only: an fp8 buffer is its bytes there
    memory_types = {**CPrinter.memory_types, "float8_e4m3fn": "uint8_t",
                    "float8_e5m2": "uint8_t"}

    def __init__(self, kernels, param_types: dict, dyn_shared: dict | None = None,
                 tensor_maps: dict | None = None):
        super().__init__()
        self.tensor_maps = tensor_maps or {}
        self.kernel_index = {name: k for k, name in enumerate(kernels)}
        self.param_types = param_types
        self.dyn_shared = dyn_shared or {}
        self.temps: list[str] = []      # live device temporaries, innermost last
        self.launches = 0

    def prelude(self) -> str:
        return DEVICE_TABLE

    def signature(self, func, name: str) -> str:
        head = super().signature(func, name)
        self.taken.add("cvl_dev")
        open_ = head.index("(")
        rest = head[open_ + 1:-1]
        params = "const cvl_device *cvl_dev" + ("" if rest == "void" else ", " + rest)
        return f"{head[:open_]}({params})"

    # device memory -------------------------------------------------------------------
    def e_BufferLoad(self, e):
        raise CodegenError(f"cuda host: the host program reads {e.buffer.name}, which "
                           "lives in device memory; compute the value in a kernel")

    def s_BufferStore(self, s):
        raise CodegenError(f"cuda host: the host program writes {s.buffer.name}, which "
                           "lives in device memory; bind the loops around the store to "
                           "blockIdx/threadIdx")

    def release_temps(self) -> None:
        """Release every live temporary (before leaving the function)."""
        for name in reversed(self.temps):
            self.emit(f"cvl_dev->release(cvl_dev->ctx, {name});")

    def emit_status(self, status: int) -> None:
        # a failed check leaves the function: its temporaries go first
        self.release_temps()
        super().emit_status(status)

    def print_allocate(self, s) -> None:
        """A ``global`` temporary from the table's ``alloc``, released at the end of
        its scope (and on every early return inside it)."""
        buf = s.buffer
        if buf.scope != "global":
            raise CodegenError(f"cuda host: buffer {buf.name} in scope {buf.scope!r} is "
                               "allocated on the host; only 'global' temporaries can be")
        name = self.bind(buf)
        t = self.mem_type(buf.dtype)
        self.emit("{")
        self.indent += 1
        self.emit_byte_size(buf)
        self.emit(f"{t} *{name} = NULL;")
        self.emit("if (cvl_bad || cvl_dev->alloc(cvl_dev->ctx, cvl_bytes > 0 ? cvl_bytes : 1, "
                  f"(void **)&{name}) != 0) {{")
        self.indent += 1
        self.release_temps()
        self.emit(f"return {STATUS_ALLOC_FAILED};")
        self.indent -= 1
        self.emit("}")
        self.temps.append(name)
        self.print_stmt(s.body)
        self.temps.pop()
        self.emit(f"cvl_dev->release(cvl_dev->ctx, {name});")
        self.indent -= 1
        self.emit("}")

    # launches ----------------------------------------------------------------------------
    def s_Evaluate(self, s):
        if type(s.value).__name__ == "IntImm":
            return
        if is_device_launch(s.value):
            self.print_launch(s.value)
            return
        raise CodegenError(f"cuda host: the host program can only launch kernels, found "
                           f"`{s.value}`")

    def print_launch(self, call) -> None:
        """One ``T.device_launch``: its arguments as the kernel's parameter types,
        then the table's ``launch``; a failure releases and returns."""
        name, dims, args = device_launch_parts(call)
        if name not in self.kernel_index:
            raise CodegenError(f"cuda host: the host launches {name!r}, which is not a "
                               f"kernel of the program ({', '.join(self.kernel_index)})")
        types = self.param_types[name]
        grid, block = launch_shape(dims)
        self.emit(f"{{ /* launch {name} */")
        self.indent += 1
        ptrs = []
        for k, (a, t) in enumerate(zip(args, types)):
            if isinstance(a, Buffer):
                ptrs.append(f"(void *)&{self.name_of(a)}")
            else:
                self.emit(f"{t} cvl_a{k} = ({t})({self.bare(a)});")
                ptrs.append(f"(void *)&cvl_a{k}")
        ptrs += self.encode_maps(name, args)
        self.emit(f"void *cvl_args[] = {{{', '.join(ptrs) or 'NULL'}}};")
        extents = ", ".join(self.extent(e) for e in grid + block)
        shared = self.dyn_shared.get(name, 0)
        self.emit(f"int32_t cvl_err = cvl_dev->launch(cvl_dev->kernels"
                  f"[{self.kernel_index[name]}], {extents}, {shared}u, cvl_dev->stream, "
                  "cvl_args, NULL);")
        self.emit("if (cvl_err != 0) {")
        self.indent += 1
        self.emit("cvl_dev->error[0] = cvl_err;")
        self.release_temps()
        self.emit(f"return {STATUS_LAUNCH_FAILED};")
        self.indent -= 1
        self.emit("}")
        self.indent -= 1
        self.emit("}")
        self.launches += 1

    def encode_maps(self, name: str, args) -> list:
        """Encode the kernel's ``CUtensorMap`` parameters (the table's ``encode_tiled``,
        the arguments of :meth:`targets.cuda.tma.TensorMap.encoding`); their
        addresses, for the launch's parameters."""
        params, maps = self.tensor_maps.get(name, ((), ()))
        vmap = {p: a for p, a in zip(params, args) if not isinstance(p, Buffer)}
        out = []
        for k, tm in enumerate(maps):
            rows, cols = (f"(uint64_t)({self.bare(substitute(d, vmap))})" for d in tm.dims)
            enc = tm.encoding(0, (0, 0))
            var = f"cvl_tm{k}"
            self.emit(f"cvl_tmap {var};")
            self.emit(f"uint64_t {var}_dims[2] = {{{cols}, {rows}}};")
            self.emit(f"uint64_t {var}_strides[1] = {{{cols} * {D.bits(tm.dtype) // 8}u}};")
            self.emit(f"uint32_t {var}_box[2] = {{{enc[5][0]}u, {enc[5][1]}u}};")
            self.emit(f"uint32_t {var}_steps[2] = {{1u, 1u}};")
            self.emit(f"int32_t {var}_err = cvl_dev->encode_tiled(&{var}, {enc[0]}, 2u, "
                      f"(void *){self.name_of(args[tm.param])}, {var}_dims, {var}_strides, "
                      f"{var}_box, {var}_steps, {enc[7]}, {enc[8]}, {enc[9]}, {enc[10]});")
            self.emit(f"if ({var}_err != 0) {{")
            self.indent += 1
            self.emit(f"cvl_dev->error[0] = {var}_err;")
            self.release_temps()
            self.emit(f"return {STATUS_ENCODE_FAILED};")
            self.indent -= 1
            self.emit("}")
            out.append(f"(void *)&{var}")
        return out

    def extent(self, e) -> str:
        """A launch extent as ``uint32_t`` (the IR guards it positive and in range)."""
        if isinstance(e, int):
            return f"{e}u"
        if type(e).__name__ == "IntImm":
            return f"{e.value}u"
        return f"(uint32_t)({self.bare(e)})"


def print_host(func, name: str, kernels, param_types: dict, dyn_shared: dict,
               tensor_maps: dict | None = None) -> str:
    """The C source of the host function ``func`` exported as ``name``.

    Example::

        >>> import cuvil_tir as T
        >>> "cvl_device" in print_host(T.PrimFunc([], T.Evaluate(T.const(0))), "f", [], {}, {})
        True
    """
    return HostPrinter(kernels, param_types, dyn_shared, tensor_maps).print_function(func,
                                                                                 name)


__all__ = ["DEVICE_TABLE", "HostPrinter", "STATUS_ENCODE_FAILED", "STATUS_LAUNCH_FAILED",
           "print_host"]
