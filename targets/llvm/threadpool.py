"""The parallel runtime of the LLVM CPU backend: a persistent pool of native threads.

A ``parallel`` loop is outlined by the code generator into a *task* function and run
by :c:func:`cuvil_parallel_launch`.  The pool itself is LLVM IR
(:mod:`targets.llvm.threadpool_ir`) JIT-compiled once per process through MCJIT; it
calls only pthread functions of the C library, so no C compiler is needed anywhere.

C ABI (exported by name, resolvable from any MCJIT module after :func:`ensure_loaded`)::

    int32_t cuvil_parallel_launch(int32_t (*task)(int32_t task_id, int32_t num_tasks,
                                                  void *closure),
                                  void *closure, int32_t num_tasks);
    void    cuvil_set_num_threads(int32_t n);      /* clamped to [1, 256] */
    int32_t cuvil_get_num_threads(void);

In another LLVM module, declare and call them as::

    declare i32 @cuvil_parallel_launch(ptr, ptr, i32)
    define internal i32 @body(i32 %task_id, i32 %num_tasks, ptr %closure) { ... }
    ...
    %err = call i32 @cuvil_parallel_launch(ptr @body, ptr %closure, i32 %n)

(:data:`DECLARATIONS` holds the three declarations.)  Call :func:`ensure_loaded`
before finalizing such a module: it registers the symbols with ``llvm.add_symbol``.

Semantics:

- Every task id in ``[0, num_tasks)`` runs exactly once, unless a task fails.  A
  task returns 0 on success; the first non-zero return is launch's return value,
  whichever thread ran it.  After a failure the tasks not yet started are skipped.
  ``num_tasks <= 0`` runs nothing and returns 0.
- Tasks are split into ``T = min(threads, num_tasks)`` contiguous blocks, block
  ``k`` being ``[k*n/T, (k+1)*n/T)``.  Each participating thread claims its own
  block first (contiguous blocks keep each thread's writes on its own cache
  lines), then steals blocks nobody has claimed yet, so a worker that is asleep or
  preempted on a shared CPU delays no one.  Block 0 (task 0 included) always runs
  on the calling thread; every block runs entirely on one thread; which thread runs
  blocks ``1..T-1`` is not fixed.
- Workers are created lazily, at the first launch that needs them, and live until
  the process exits (or :func:`shutdown`).  Between jobs a worker spins briefly on
  an atomic generation counter with the CPU's pause hint (calling ``sched_yield``
  every 16 pauses, so that on an oversubscribed CPU it does not keep the caller off
  its core), then blocks on a condition variable, so idle workers cost no CPU; the
  caller waits for completion the same way.  Back-to-back launches never take the
  mutex.  Workers get the C library's default stack (8 MiB on glibc).
- Memory: everything the caller wrote before the launch is visible to every task,
  and everything the tasks wrote is visible to the caller when launch returns.
  Tasks of one launch run concurrently, so they must not race on shared data.
- Nested parallelism: a launch made from inside a task (or from another thread
  while a launch is in progress) runs all its tasks serially on the calling thread,
  in task-id order, and returns the first failure.  It never deadlocks.
- Placement (Linux): workers are kept off the CPU the launching thread runs on
  (``pthread_setaffinity_np`` to the process's allowed CPUs minus that one, redone
  only when the caller has moved), because the kernel otherwise often wakes a
  worker onto the caller's core and lets the two time-share it for milliseconds.
- The number of threads (caller included) defaults to ``CUVIL_NUM_THREADS``, else
  ``os.cpu_count()``, read once when the pool is loaded.
- After ``fork()`` the child's pool is reset (its workers do not exist there) and is
  rebuilt by the child's first launch.

Example::

    >>> addresses = ensure_loaded()
    >>> sorted(addresses)[:2]
    ['cuvil_get_num_threads', 'cuvil_parallel_launch']
    >>> old = get_num_threads(); set_num_threads(3); get_num_threads()
    3
    >>> set_num_threads(old)
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import hashlib
import os
import threading

import llvmlite
import llvmlite.binding as llvm

from cuvil_tir.errors import TargetError
from cuvil_tir.target import cache

from .threadpool_ir import MAX_THREADS, pool_ir
from .workspace_ir import DECLARATIONS as _WORKSPACE, workspace_ir

__all__ = ["DECLARATIONS", "EXPORTED", "MAX_THREADS", "ensure_loaded", "get_num_threads",
           "set_num_threads", "num_workers", "shutdown", "default_num_threads",
           "JitModule", "uses_runtime", "release_workspace"]

# Signatures of the exported C ABI, as another LLVM module declares them.
EXPORTED = {
    "cuvil_parallel_launch": "declare i32 @cuvil_parallel_launch(ptr, ptr, i32)",
    "cuvil_set_num_threads": "declare void @cuvil_set_num_threads(i32)",
    "cuvil_get_num_threads": "declare i32 @cuvil_get_num_threads()",
    **_WORKSPACE,   # the heap-buffer cache of generated code (targets.llvm.workspace_ir)
}
DECLARATIONS = "\n".join(EXPORTED.values()) + "\n"


def uses_runtime(code) -> bool:
    """True when LLVM IR text (or an object file's bytes) refers to a function of this
    runtime, so :func:`ensure_loaded` must run before it is linked.

    Example::

        >>> uses_runtime("call ptr @cuvil_workspace_alloc(i64 4096)"), uses_runtime("ret void")
        (True, False)
    """
    names = EXPORTED if isinstance(code, str) else [n.encode() for n in EXPORTED]
    return any(name in code for name in names)

# Lifecycle entry points, used from Python only.
_INTERNAL = ("cuvil_pool_init", "cuvil_pool_shutdown", "cuvil_pool_num_workers",
             "cuvil_workspace_release")

_LIBC_SYMBOLS = ("pthread_create", "pthread_join", "pthread_mutex_init",
                 "pthread_mutex_lock", "pthread_mutex_unlock", "pthread_cond_init",
                 "pthread_cond_wait", "pthread_cond_signal", "pthread_cond_broadcast",
                 "sched_yield")

_LOCK = threading.Lock()


class _Pool:
    """The loaded pool: its engine (deliberately never disposed) and entry points."""

    def __init__(self):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _register_libc_symbols()
        triple = llvm.get_process_triple()
        engine = _compiled_engine(pool_ir(triple) + workspace_ir())
        self.addresses = {name: engine.get_function_address(name)
                          for name in (*EXPORTED, *_INTERNAL)}
        # Workers run this machine code until the process dies; an engine disposed
        # at interpreter teardown would pull it from under them, so leak it.
        engine.detach()
        for name in EXPORTED:
            llvm.add_symbol(name, self.addresses[name])
        fn = ctypes.CFUNCTYPE
        self.init = fn(None, ctypes.c_int32)(self.addresses["cuvil_pool_init"])
        self.stop = fn(ctypes.c_int32)(self.addresses["cuvil_pool_shutdown"])
        self.workers = fn(ctypes.c_int32)(self.addresses["cuvil_pool_num_workers"])
        self.set_threads = fn(None, ctypes.c_int32)(self.addresses["cuvil_set_num_threads"])
        self.get_threads = fn(ctypes.c_int32)(self.addresses["cuvil_get_num_threads"])
        self.release = fn(None)(self.addresses["cuvil_workspace_release"])
        self.default_threads = default_num_threads()
        self.init(self.default_threads)


_POOL: _Pool | None = None


def _register_libc_symbols() -> None:
    """Make the pthread functions resolvable by MCJIT, from this process's libc."""
    process = ctypes.CDLL(None)
    extra = ctypes.util.find_library("pthread")
    libs = [process] + ([ctypes.CDLL(extra)] if extra else [])
    for name in _LIBC_SYMBOLS:
        for lib in libs:
            fn = getattr(lib, name, None)
            if fn is not None:
                llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
                break
        else:
            raise TargetError(f"thread pool: the C library function '{name}' was not found "
                              "in this process or in libpthread; the LLVM backend's "
                              "parallel runtime needs POSIX threads")


def _compiled_engine(ir: str):
    """An MCJIT engine holding the pool's machine code: from the compile cache when
    an earlier process stored it (compiling the pool costs ~0.2 s a process), else
    compiled here and stored."""
    machine = _target_machine()
    key = hashlib.sha256("\0".join(("cuvil-threadpool", ir, machine.triple,
                                     llvm.get_host_cpu_name(), llvm.get_host_cpu_features()
                                     .flatten(), llvmlite.__version__)).encode()).hexdigest()
    store = cache.store() if cache.enabled() else None
    blobs = store.get(key) if store is not None else None
    if blobs is not None and "obj" in blobs:
        return _object_engine(machine, blobs["obj"])
    module = llvm.parse_assembly(ir)
    module.verify()
    module.data_layout = str(machine.target_data)
    _optimize(module, machine)
    if store is not None:
        # code generation once: the object stored is the object loaded
        obj = machine.emit_object(module)
        store.put(key, {"obj": obj})
        return _object_engine(machine, obj)
    engine = llvm.create_mcjit_compiler(module, machine)  # owns the machine now
    engine.finalize_object()
    return engine


def _object_engine(machine, obj: bytes):
    """An MCJIT engine running the machine code of ``obj``."""
    empty = llvm.parse_assembly("")
    empty.triple = machine.triple
    engine = llvm.create_mcjit_compiler(empty, machine)
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    return engine


def _target_machine():
    """A fresh JIT target machine for this process (an MCJIT engine owns its own)."""
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(opt=2, jit=True)


def _optimize(module, machine) -> None:
    """Run LLVM's O2 pipeline (inlines the pause helper, promotes the locals)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    builder = llvm.create_pass_builder(machine, pto)
    builder.getModulePassManager().run(module, builder)


def default_num_threads() -> int:
    """Threads the pool starts with: ``CUVIL_NUM_THREADS``, else ``os.cpu_count()``.

    Example::

        >>> default_num_threads() >= 1
        True
    """
    raw = os.environ.get("CUVIL_NUM_THREADS", "").strip()
    if not raw:
        return max(1, min(os.cpu_count() or 1, MAX_THREADS))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_THREADS:
        raise TargetError(f"CUVIL_NUM_THREADS: expected an integer in [1, {MAX_THREADS}], "
                          f"found {raw!r}; unset it to use os.cpu_count()")
    return value


def _pool() -> _Pool:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = _Pool()
            atexit.register(_at_exit)
            os.register_at_fork(after_in_child=_after_fork_in_child)
        return _POOL


def _at_exit() -> None:
    if _POOL is not None:
        _POOL.stop()


def _after_fork_in_child() -> None:
    # Only the forking thread exists in the child: forget the parent's workers and
    # rebuild the mutex and condition variables, keeping the thread-count setting.
    if _POOL is not None:
        _POOL.init(_POOL.get_threads())


def ensure_loaded() -> dict[str, int]:
    """JIT the pool (once per process) and return the exported symbols' addresses.

    After this call, MCJIT modules resolve ``cuvil_parallel_launch``,
    ``cuvil_set_num_threads`` and ``cuvil_get_num_threads`` by name.

    Example::

        >>> ensure_loaded()["cuvil_parallel_launch"] != 0
        True
    """
    pool = _pool()
    return {name: pool.addresses[name] for name in EXPORTED}


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (the caller included) for the following launches.

    Example::

        >>> old = get_num_threads(); set_num_threads(2); get_num_threads()
        2
        >>> set_num_threads(old)
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_THREADS:
        raise TargetError(f"set_num_threads: expected an int in [1, {MAX_THREADS}], "
                          f"got {n!r}")
    _pool().set_threads(n)


def release_workspace() -> None:
    """Free the heap blocks that generated functions returned to the workspace cache
    (:mod:`targets.llvm.workspace_ir`: at most ``SLOTS`` blocks, kept so the next
    call does not fault their pages in again).

    Example::

        >>> release_workspace()
    """
    _pool().release()


def get_num_threads() -> int:
    """Threads (the caller included) that a launch uses.

    Example::

        >>> get_num_threads() >= 1
        True
    """
    return _pool().get_threads()


def num_workers() -> int:
    """Worker threads started so far (the caller is not counted; created lazily).

    Example::

        >>> num_workers() >= 0
        True
    """
    return _pool().workers()


def shutdown() -> bool:
    """Stop and join all workers; the next launch starts new ones.

    Returns False, doing nothing, if a launch is running on another thread.  Runs
    automatically at interpreter exit.

    Example::

        >>> shutdown(); num_workers()
        True
        0
    """
    return _pool().stop() == 0


class JitModule:
    """LLVM IR text compiled by MCJIT, able to call the pool's exported symbols.

    A small helper for tests, benchmarks and hand-written kernels; the LLVM
    backend's own runtime manages its modules itself.

    Example::

        >>> m = JitModule("define i32 @f() {\\n  %n = call i32 @cuvil_get_num_threads()\\n"
        ...               "  ret i32 %n\\n}\\n" + DECLARATIONS)
        >>> ctypes.CFUNCTYPE(ctypes.c_int32)(m.address("f"))() == get_num_threads()
        True
    """

    def __init__(self, ir_text: str):
        ensure_loaded()
        module = llvm.parse_assembly(ir_text)
        module.verify()
        machine = _target_machine()
        module.triple = llvm.get_process_triple()
        module.data_layout = str(machine.target_data)
        _optimize(module, machine)
        self._engine = llvm.create_mcjit_compiler(module, machine)
        self._engine.finalize_object()

    def address(self, name: str) -> int:
        """The address of function ``name``; a TargetError if it is not defined.

        Example::

            >>> JitModule("define void @g() {\\n  ret void\\n}\\n").address("g") != 0
            True
        """
        addr = self._engine.get_function_address(name)
        if not addr:
            raise TargetError(f"JitModule: no function named '{name}' in the module")
        return addr
