"""Thread placement of the native pool's workers, as LLVM IR text.

On Linux a launch keeps the pool's workers off the CPU of the thread that launched
it (see ``@pool_avoided_cpu`` in :mod:`targets.llvm.threadpool_ir`); elsewhere the
two placement functions do nothing.  The functions defined here are
``@pool_placement_init`` (read the allowed CPUs once) and
``@pool_place_workers(i32 started)``.

Example::

    >>> "define internal void @pool_place_workers" in placement_ir("arm64-apple-darwin", 256)
    True
"""

from __future__ import annotations

# Thread placement on Linux: the launching thread's CPU, and a worker's move off it.
# Bytes of the CPU mask passed to sched_{get,set}affinity (1024 CPUs, glibc's
# cpu_set_t); a caller on a CPU beyond it is not avoided.
CPU_MASK_BYTES = 128

_PLACEMENT_LINUX = r"""
declare i32 @sched_getcpu()
declare i32 @sched_getaffinity(i32, i64, ptr)
declare i32 @pthread_setaffinity_np(i64, i64, ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

; the CPUs this process may run on, read at init; @pool_mask_ok = 0 if unknown
@pool_cpumask = internal global [@MASK@ x i8] zeroinitializer, align 64
@pool_mask_ok = internal global i32 0, align 4

define internal void @pool_placement_init() {
entry:
  %r = call i32 @sched_getaffinity(i32 0, i64 @MASK@, ptr @pool_cpumask)
  %ok = icmp eq i32 %r, 0
  %v = zext i1 %ok to i32
  store i32 %v, ptr @pool_mask_ok, align 4
  ret void
}

; Keeps workers 1..started off the caller's CPU (see @pool_avoided_cpu); only
; called by the launch that owns the pool.
define internal void @pool_place_workers(i32 %started) {
entry:
  %mask = alloca [@MASK@ x i8], align 8
  %c = call i32 @sched_getcpu()
  %prev = load i32, ptr @pool_avoided_cpu, align 4
  %moved = icmp ne i32 %c, %prev
  %ok = load i32, ptr @pool_mask_ok, align 4
  %known = icmp ne i32 %ok, 0
  %inrange = icmp ult i32 %c, @MASKBITS@
  %a = and i1 %known, %inrange
  %usable = and i1 %a, %moved
  br i1 %usable, label %build, label %done
build:
  call void @llvm.memcpy.p0.p0.i64(ptr %mask, ptr @pool_cpumask, i64 @MASK@, i1 false)
  %byte = lshr i32 %c, 3
  %byte64 = zext i32 %byte to i64
  %bp = getelementptr [@MASK@ x i8], ptr %mask, i64 0, i64 %byte64
  %bv = load i8, ptr %bp, align 1
  %bit32 = and i32 %c, 7
  %bit = trunc i32 %bit32 to i8
  %one = shl i8 1, %bit
  %clear = xor i8 %one, -1
  %nv = and i8 %bv, %clear
  store i8 %nv, ptr %bp, align 1
  ; nothing left (the caller's CPU is the only one allowed): leave workers alone,
  ; but remember the CPU so the next launches skip this work
  %any = call i1 @pool_mask_nonempty(ptr %mask)
  br i1 %any, label %head, label %record
head:
  %i = phi i32 [ 1, %build ], [ %i.next, %set ]
  %more = icmp sle i32 %i, %started
  br i1 %more, label %set, label %record
set:
  %i64 = zext i32 %i to i64
  %slot = getelementptr [@MAX@ x i64], ptr @pool_threads, i64 0, i64 %i64
  %th = load i64, ptr %slot, align 8
  %r = call i32 @pthread_setaffinity_np(i64 %th, i64 @MASK@, ptr %mask)
  %i.next = add i32 %i, 1
  br label %head
record:
  store i32 %c, ptr @pool_avoided_cpu, align 4
  br label %done
done:
  ret void
}

define internal i1 @pool_mask_nonempty(ptr %mask) {
entry:
  br label %head
head:
  %k = phi i64 [ 0, %entry ], [ %k.next, %next ]
  %more = icmp ult i64 %k, @MASK@
  br i1 %more, label %load, label %empty
load:
  %p = getelementptr i8, ptr %mask, i64 %k
  %v = load i8, ptr %p, align 1
  %nz = icmp ne i8 %v, 0
  br i1 %nz, label %found, label %next
next:
  %k.next = add i64 %k, 1
  br label %head
found:
  ret i1 true
empty:
  ret i1 false
}
"""

_PLACEMENT_NONE = r"""
define internal void @pool_placement_init() {
entry:
  ret void
}

define internal void @pool_place_workers(i32 %started) {
entry:
  ret void
}
"""


def placement_ir(triple: str, max_threads: int) -> str:
    """The thread-placement functions for ``triple`` (Linux: keep workers off the caller's CPU).

    ``max_threads`` is the size of the pool's thread-handle table (``@pool_threads``).

    Example::

        >>> "pthread_setaffinity_np" in placement_ir("x86_64-unknown-linux-gnu", 256)
        True
        >>> "pthread_setaffinity_np" in placement_ir("arm64-apple-darwin", 256)
        False
    """
    if "linux" not in triple:
        return _PLACEMENT_NONE
    return (_PLACEMENT_LINUX.replace("@MASKBITS@", str(8 * CPU_MASK_BYTES))
            .replace("@MASK@", str(CPU_MASK_BYTES))
            .replace("@MAX@", str(max_threads)))
