"""The LLVM IR text of the native thread pool (see :mod:`targets.llvm.threadpool`).

One module, JIT-compiled once per process, that owns every piece of pool state in
globals and talks to the C library only through pthread functions.  It is written
as IR text rather than with a builder because the control flow is fixed: the text
*is* the implementation, and reading it top to bottom is reading the algorithm.

State (each hot word on its own 64-byte line, so the caller's writes to ``state``
and the participants' writes to ``done`` do not false-share):

- ``@pool_state`` (i64): ``generation << 16 | active_threads``.  The caller bumps
  it to publish a job; workers compare it with the last value they saw.  Packing
  the active-thread count into the same word lets a worker decide with one atomic
  load whether the job is for it.
- ``@pool_claims``: per block, the generation of the last job that claimed it.  A
  job of ``T`` active threads has ``T`` contiguous blocks of tasks; each thread
  claims its own block by CAS, then steals blocks nobody has claimed, so a worker
  that is asleep or preempted (the CPU is shared) delays nobody.  A worker waking
  after its job ended claims nothing and never reads a later job's fields.
- ``@pool_done`` (i32): blocks of the current job finished; the job is over at
  ``T``.
- ``@pool_error`` (i32): first non-zero task return of the current job.
- ``@pool_busy`` (i32): 1 while a launch owns the pool; a launch that finds it
  taken (nested or concurrent) runs serially on its own thread.
- ``@pool_sleepers`` / ``@pool_caller_waiting``: who is blocked on a condition
  variable, so that the fast path never takes the mutex.
- ``@pool_avoided_cpu`` (i32, Linux only): the CPU the workers are kept off.  A
  launch that finds the caller on another CPU than last time restricts every
  worker to the allowed CPUs minus the caller's (``pthread_setaffinity_np``; the
  allowed set is read once at init), before it wakes them.  Measured on a 2-vCPU
  VM: the kernel often wakes the worker onto the caller's CPU (a wake-affine
  placement) and leaves both threads time-sharing one core for milliseconds, so a
  12 ms parallel GEMM ran anywhere between 100 and 175 GFLOP/s; with workers kept
  off the caller's CPU it stays near 170.  The syscalls happen only when the
  caller has moved.  Elsewhere ``@pool_place_workers`` is a no-op.

Example::

    >>> text = pool_ir("x86_64-unknown-linux-gnu")
    >>> "define i32 @cuvil_parallel_launch(ptr %task, ptr %closure, i32 %n)" in text
    True
"""

from __future__ import annotations

from .threadpool_placement import placement_ir

# Most threads (caller included) the pool will run; the active count lives in the
# low 16 bits of the state word, and the thread-handle table has this many slots.
MAX_THREADS = 256

# Pause iterations a worker (and the waiting caller) spins before blocking.  About
# 10-100 microseconds depending on the CPU's pause latency: long enough that
# back-to-back launches never touch the mutex, short enough that idle workers stop
# burning a shared CPU almost at once.
SPIN_ITERATIONS = 4096

# Every this many pause iterations a spinning thread calls sched_yield: when the
# CPU is oversubscribed, a worker spinning on the caller's core would otherwise
# hold that core for its whole spin phase while the caller cannot run.
YIELD_EVERY = 16

# Byte-array size for pthread_mutex_t / pthread_cond_t: larger than any libc's
# (glibc 40/48, musl 24/48, macOS 64/48), so the IR needs no per-platform layout.
SYNC_BYTES = 64


def pause_ir(triple: str) -> tuple[str, str]:
    """The spin-wait hint for ``triple``: (declaration, call instruction).

    Example::

        >>> pause_ir("x86_64-unknown-linux-gnu")[1]
        'call void @llvm.x86.sse2.pause()'
        >>> pause_ir("riscv64-unknown-linux-gnu")
        ('', '')
    """
    arch = triple.split("-", 1)[0]
    if arch in ("x86_64", "i386", "i686", "amd64"):
        return "declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()"
    if arch in ("aarch64", "arm64"):
        return "", 'call void asm sideeffect "yield", ""()'
    return "", ""


_TEMPLATE = r"""
; ---- C library -------------------------------------------------------------
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare i32 @pthread_mutex_init(ptr, ptr)
declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @pthread_cond_init(ptr, ptr)
declare i32 @pthread_cond_wait(ptr, ptr)
declare i32 @pthread_cond_signal(ptr)
declare i32 @pthread_cond_broadcast(ptr)
declare i32 @sched_yield()
@PAUSE_DECL@

; ---- state -----------------------------------------------------------------
@pool_mutex = internal global [@SYNC@ x i8] zeroinitializer, align 64
@pool_work_cond = internal global [@SYNC@ x i8] zeroinitializer, align 64
@pool_done_cond = internal global [@SYNC@ x i8] zeroinitializer, align 64
@pool_state = internal global i64 0, align 64
@pool_done = internal global i32 0, align 64
@pool_error = internal global i32 0, align 64
@pool_busy = internal global i32 0, align 64
@pool_sleepers = internal global i32 0, align 64
@pool_caller_waiting = internal global i32 0, align 64
@pool_task = internal global ptr null, align 64
@pool_closure = internal global ptr null, align 8
@pool_ntasks = internal global i32 0, align 8
@pool_num_threads = internal global i32 1, align 64
@pool_started = internal global i32 0, align 4
@pool_spawn_state = internal global i64 0, align 8
@pool_quit = internal global i32 0, align 4
@pool_avoided_cpu = internal global i32 -1, align 64
@pool_threads = internal global [@MAX@ x i64] zeroinitializer, align 64
; claim word of block k at index 8*k (one cache line each): the generation of the
; last job in which block k was claimed
@pool_claims = internal global [@CLAIMS@ x i64] zeroinitializer, align 64

define internal void @pool_pause() alwaysinline {
  @PAUSE_CALL@
  ret void
}

; Runs block k of T: tasks [k*n/T, (k+1)*n/T).  Stops early once any task of the
; job has failed; the first failure is kept in @pool_error.  Only called after
; block k was claimed, so the job (and its fields) cannot end underneath it.
define internal void @pool_run_block(i32 %k, i32 %T) {
entry:
  %task = load ptr, ptr @pool_task, align 8
  %closure = load ptr, ptr @pool_closure, align 8
  %n = load i32, ptr @pool_ntasks, align 4
  %n64 = zext i32 %n to i64
  %T64 = zext i32 %T to i64
  %k64 = zext i32 %k to i64
  %lo.p = mul i64 %k64, %n64
  %lo64 = udiv i64 %lo.p, %T64
  %k64n = add i64 %k64, 1
  %hi.p = mul i64 %k64n, %n64
  %hi64 = udiv i64 %hi.p, %T64
  %lo = trunc i64 %lo64 to i32
  %hi = trunc i64 %hi64 to i32
  br label %head
head:
  %t = phi i32 [ %lo, %entry ], [ %t.next, %ok ]
  %more = icmp slt i32 %t, %hi
  br i1 %more, label %check, label %done
check:
  %err = load atomic i32, ptr @pool_error monotonic, align 4
  %failed = icmp ne i32 %err, 0
  br i1 %failed, label %done, label %body
body:
  %r = call i32 %task(i32 %t, i32 %n, ptr %closure)
  %bad = icmp ne i32 %r, 0
  br i1 %bad, label %record, label %ok
ok:
  %t.next = add i32 %t, 1
  br label %head
record:
  %cx = cmpxchg ptr @pool_error, i32 0, i32 %r monotonic monotonic
  br label %done
done:
  ret void
}

; Thread idx's part of job `gen` with T blocks: claim and run its own block, then
; any block nobody has claimed yet (a worker that is asleep or preempted).  Block 0
; is the caller's: workers never take it, so task 0 always runs on the caller.
; A claim is a CAS of the block's word from a value below `gen` to `gen`; a worker
; that wakes after job `gen` ended finds every word of it at `gen` or above and
; claims nothing, so it never touches a later job's fields.
define internal void @pool_participate(i32 %idx, i32 %T, i64 %gen) {
entry:
  br label %head
head:
  %j = phi i32 [ 0, %entry ], [ %j.next, %next ]
  %more = icmp ult i32 %j, %T
  br i1 %more, label %pick, label %done
pick:
  %k0 = add i32 %idx, %j
  %wrap = icmp uge i32 %k0, %T
  %k1 = sub i32 %k0, %T
  %k2 = add i32 %k1, 1
  %k = select i1 %wrap, i32 %k2, i32 %k0
  %k64 = zext i32 %k to i64
  %pad = mul i64 %k64, 8
  %slot = getelementptr i64, ptr @pool_claims, i64 %pad
  %w = load atomic i64, ptr %slot monotonic, align 8
  %free = icmp ult i64 %w, %gen
  br i1 %free, label %claim, label %next
claim:
  %cx = cmpxchg ptr %slot, i64 %w, i64 %gen acq_rel monotonic
  %won = extractvalue { i64, i1 } %cx, 1
  br i1 %won, label %run, label %next
run:
  call void @pool_run_block(i32 %k, i32 %T)
  %d = atomicrmw add ptr @pool_done, i32 1 seq_cst
  %d1 = add i32 %d, 1
  %last = icmp eq i32 %d1, %T
  br i1 %last, label %maybe_signal, label %next
maybe_signal:
  %cw = load atomic i32, ptr @pool_caller_waiting seq_cst, align 4
  %blocked = icmp ne i32 %cw, 0
  br i1 %blocked, label %signal, label %next
signal:
  %l1 = call i32 @pthread_mutex_lock(ptr @pool_mutex)
  %g0 = call i32 @pthread_cond_signal(ptr @pool_done_cond)
  %u1 = call i32 @pthread_mutex_unlock(ptr @pool_mutex)
  br label %next
next:
  %j.next = add i32 %j, 1
  br label %head
done:
  ret void
}

; Worker main loop: spin on @pool_state, then block on @pool_work_cond.
define internal ptr @pool_worker(ptr %arg) {
entry:
  %idx = ptrtoint ptr %arg to i32
  %seen.addr = alloca i64, align 8
  %s0 = load atomic i64, ptr @pool_spawn_state monotonic, align 8
  store i64 %s0, ptr %seen.addr, align 8
  br label %spin
spin:
  %i = phi i32 [ 0, %entry ], [ %i.next, %pause ], [ %i.next, %yield ], [ 0, %work ]
  %s = load atomic i64, ptr @pool_state acquire, align 8
  %seen = load i64, ptr %seen.addr, align 8
  %changed = icmp ne i64 %s, %seen
  br i1 %changed, label %got, label %spin_more
spin_more:
  %keep = icmp ult i32 %i, @SPIN@
  br i1 %keep, label %pause, label %sleep
pause:
  call void @pool_pause()
  %i.next = add i32 %i, 1
  %tick = and i32 %i.next, @YIELD_MASK@
  %give = icmp eq i32 %tick, 0
  br i1 %give, label %yield, label %spin
yield:
  ; let a runnable thread on this core (often the launching caller) go first
  %y = call i32 @sched_yield()
  br label %spin
sleep:
  %l0 = call i32 @pthread_mutex_lock(ptr @pool_mutex)
  %sl0 = atomicrmw add ptr @pool_sleepers, i32 1 seq_cst
  br label %wait
wait:
  %s2 = load atomic i64, ptr @pool_state seq_cst, align 8
  %seen2 = load i64, ptr %seen.addr, align 8
  %changed2 = icmp ne i64 %s2, %seen2
  br i1 %changed2, label %woke, label %block
block:
  %w0 = call i32 @pthread_cond_wait(ptr @pool_work_cond, ptr @pool_mutex)
  br label %wait
woke:
  %sl1 = atomicrmw sub ptr @pool_sleepers, i32 1 seq_cst
  %u0 = call i32 @pthread_mutex_unlock(ptr @pool_mutex)
  br label %got
got:
  %snew = phi i64 [ %s, %spin ], [ %s2, %woke ]
  store i64 %snew, ptr %seen.addr, align 8
  %q = load atomic i32, ptr @pool_quit acquire, align 4
  %quit = icmp ne i32 %q, 0
  br i1 %quit, label %exit, label %job
job:
  %T64 = and i64 %snew, 65535
  %T = trunc i64 %T64 to i32
  %gen = lshr i64 %snew, 16
  %active = icmp ult i32 %idx, %T
  ; not part of this job: go straight back to sleep
  br i1 %active, label %work, label %sleep
work:
  call void @pool_participate(i32 %idx, i32 %T, i64 %gen)
  br label %spin
exit:
  ret ptr null
}

; Starts workers 1 .. min(nt, MAX)-1 that do not exist yet; stops at the first
; pthread_create failure (the launch then uses the workers it has).
define internal void @pool_spawn(i32 %nt) {
entry:
  %want0 = sub i32 %nt, 1
  %cap = icmp sgt i32 %want0, @MAXW@
  %want = select i1 %cap, i32 @MAXW@, i32 %want0
  %cur = load atomic i64, ptr @pool_state monotonic, align 8
  store atomic i64 %cur, ptr @pool_spawn_state monotonic, align 8
  br label %head
head:
  %started = load i32, ptr @pool_started, align 4
  %enough = icmp sge i32 %started, %want
  br i1 %enough, label %done, label %create
create:
  %idx = add i32 %started, 1
  %idx64 = zext i32 %idx to i64
  %slot = getelementptr [@MAX@ x i64], ptr @pool_threads, i64 0, i64 %idx64
  %arg = inttoptr i64 %idx64 to ptr
  %rc = call i32 @pthread_create(ptr %slot, ptr null, ptr @pool_worker, ptr %arg)
  %fail = icmp ne i32 %rc, 0
  br i1 %fail, label %done, label %created
created:
  store i32 %idx, ptr @pool_started, align 4
  ; a new worker has the default affinity: place every worker again at this launch
  store i32 -1, ptr @pool_avoided_cpu, align 4
  br label %head
done:
  ret void
}

; Caller side of completion: spin on @pool_done reaching T, then block on @pool_done_cond.
define internal void @pool_wait_done(i32 %T) {
entry:
  br label %spin
spin:
  %i = phi i32 [ 0, %entry ], [ %i.next, %pause ], [ %i.next, %yield ]
  %p = load atomic i32, ptr @pool_done acquire, align 4
  %zero = icmp eq i32 %p, %T
  br i1 %zero, label %done, label %spin_more
spin_more:
  %keep = icmp ult i32 %i, @SPIN@
  br i1 %keep, label %pause, label %sleep
pause:
  call void @pool_pause()
  %i.next = add i32 %i, 1
  %tick = and i32 %i.next, @YIELD_MASK@
  %give = icmp eq i32 %tick, 0
  br i1 %give, label %yield, label %spin
yield:
  ; let a runnable thread on this core (often the launching caller) go first
  %y = call i32 @sched_yield()
  br label %spin
sleep:
  %l0 = call i32 @pthread_mutex_lock(ptr @pool_mutex)
  store atomic i32 1, ptr @pool_caller_waiting seq_cst, align 4
  br label %wait
wait:
  %p2 = load atomic i32, ptr @pool_done seq_cst, align 4
  %zero2 = icmp eq i32 %p2, %T
  br i1 %zero2, label %woke, label %block
block:
  %w0 = call i32 @pthread_cond_wait(ptr @pool_done_cond, ptr @pool_mutex)
  br label %wait
woke:
  store atomic i32 0, ptr @pool_caller_waiting monotonic, align 4
  %u0 = call i32 @pthread_mutex_unlock(ptr @pool_mutex)
  br label %done
done:
  ret void
}

define internal i32 @pool_serial(ptr %task, ptr %closure, i32 %n) {
entry:
  br label %head
head:
  %t = phi i32 [ 0, %entry ], [ %t.next, %ok ]
  %more = icmp slt i32 %t, %n
  br i1 %more, label %body, label %done
body:
  %r = call i32 %task(i32 %t, i32 %n, ptr %closure)
  %bad = icmp ne i32 %r, 0
  br i1 %bad, label %fail, label %ok
ok:
  %t.next = add i32 %t, 1
  br label %head
fail:
  ret i32 %r
done:
  ret i32 0
}

; ---- exported C ABI ----------------------------------------------------------
define i32 @cuvil_parallel_launch(ptr %task, ptr %closure, i32 %n) {
entry:
  %small = icmp slt i32 %n, 2
  br i1 %small, label %serial, label %threads
threads:
  %nt = load atomic i32, ptr @pool_num_threads monotonic, align 4
  %one = icmp sle i32 %nt, 1
  br i1 %one, label %serial, label %acquire
acquire:
  %cx = cmpxchg ptr @pool_busy, i32 0, i32 1 acquire monotonic
  %owned = extractvalue { i32, i1 } %cx, 1
  br i1 %owned, label %spawn, label %serial
serial:
  %rs = call i32 @pool_serial(ptr %task, ptr %closure, i32 %n)
  ret i32 %rs
spawn:
  call void @pool_spawn(i32 %nt)
  %started = load i32, ptr @pool_started, align 4
  %avail = add i32 %started, 1
  %c1 = icmp slt i32 %avail, %nt
  %t1 = select i1 %c1, i32 %avail, i32 %nt
  %c2 = icmp slt i32 %t1, %n
  %T = select i1 %c2, i32 %t1, i32 %n
  store ptr %task, ptr @pool_task, align 8
  store ptr %closure, ptr @pool_closure, align 8
  store i32 %n, ptr @pool_ntasks, align 4
  store atomic i32 0, ptr @pool_error monotonic, align 4
  store atomic i32 0, ptr @pool_done monotonic, align 4
  call void @pool_place_workers(i32 %started)
  %old = load atomic i64, ptr @pool_state monotonic, align 8
  %gen = lshr i64 %old, 16
  %gen1 = add i64 %gen, 1
  %hi = shl i64 %gen1, 16
  %T64 = zext i32 %T to i64
  %new = or i64 %hi, %T64
  store atomic i64 %new, ptr @pool_state seq_cst, align 8
  %sl = load atomic i32, ptr @pool_sleepers seq_cst, align 4
  %anyone = icmp ne i32 %sl, 0
  br i1 %anyone, label %wake, label %run
wake:
  %l0 = call i32 @pthread_mutex_lock(ptr @pool_mutex)
  %b0 = call i32 @pthread_cond_broadcast(ptr @pool_work_cond)
  %u0 = call i32 @pthread_mutex_unlock(ptr @pool_mutex)
  br label %run
run:
  call void @pool_participate(i32 0, i32 %T, i64 %gen1)
  call void @pool_wait_done(i32 %T)
  %err = load atomic i32, ptr @pool_error monotonic, align 4
  store atomic i32 0, ptr @pool_busy release, align 4
  ret i32 %err
}

define void @cuvil_set_num_threads(i32 %n) {
entry:
  %lo = icmp slt i32 %n, 1
  %a = select i1 %lo, i32 1, i32 %n
  %hi = icmp sgt i32 %a, @MAX@
  %b = select i1 %hi, i32 @MAX@, i32 %a
  store atomic i32 %b, ptr @pool_num_threads monotonic, align 4
  ret void
}

define i32 @cuvil_get_num_threads() {
entry:
  %n = load atomic i32, ptr @pool_num_threads monotonic, align 4
  ret i32 %n
}

; ---- lifecycle (called from Python) ------------------------------------------
define void @cuvil_pool_init(i32 %nt) {
entry:
  %a = call i32 @pthread_mutex_init(ptr @pool_mutex, ptr null)
  %b = call i32 @pthread_cond_init(ptr @pool_work_cond, ptr null)
  %c = call i32 @pthread_cond_init(ptr @pool_done_cond, ptr null)
  store i32 0, ptr @pool_started, align 4
  store atomic i32 0, ptr @pool_busy monotonic, align 4
  store atomic i32 0, ptr @pool_sleepers monotonic, align 4
  store atomic i32 0, ptr @pool_caller_waiting monotonic, align 4
  store atomic i32 0, ptr @pool_done monotonic, align 4
  store atomic i32 0, ptr @pool_quit monotonic, align 4
  store i32 -1, ptr @pool_avoided_cpu, align 4
  call void @pool_placement_init()
  call void @cuvil_set_num_threads(i32 %nt)
  ret void
}

define i32 @cuvil_pool_num_workers() {
entry:
  %n = load i32, ptr @pool_started, align 4
  ret i32 %n
}

; Stops and joins every worker.  Returns 1 (and does nothing) if a launch is in
; progress on another thread.
define i32 @cuvil_pool_shutdown() {
entry:
  %cx = cmpxchg ptr @pool_busy, i32 0, i32 1 acquire monotonic
  %owned = extractvalue { i32, i1 } %cx, 1
  br i1 %owned, label %stop, label %refused
refused:
  ret i32 1
stop:
  store atomic i32 1, ptr @pool_quit seq_cst, align 4
  %old = load atomic i64, ptr @pool_state monotonic, align 8
  %gen = lshr i64 %old, 16
  %gen1 = add i64 %gen, 1
  %new = shl i64 %gen1, 16
  store atomic i64 %new, ptr @pool_state seq_cst, align 8
  %l0 = call i32 @pthread_mutex_lock(ptr @pool_mutex)
  %b0 = call i32 @pthread_cond_broadcast(ptr @pool_work_cond)
  %u0 = call i32 @pthread_mutex_unlock(ptr @pool_mutex)
  %started = load i32, ptr @pool_started, align 4
  br label %head
head:
  %i = phi i32 [ 1, %stop ], [ %i.next, %join ]
  %more = icmp sle i32 %i, %started
  br i1 %more, label %join, label %done
join:
  %i64 = zext i32 %i to i64
  %slot = getelementptr [@MAX@ x i64], ptr @pool_threads, i64 0, i64 %i64
  %th = load i64, ptr %slot, align 8
  %j = call i32 @pthread_join(i64 %th, ptr null)
  %i.next = add i32 %i, 1
  br label %head
done:
  store i32 0, ptr @pool_started, align 4
  store atomic i32 0, ptr @pool_quit seq_cst, align 4
  store atomic i32 0, ptr @pool_busy release, align 4
  ret i32 0
}
"""


def pool_ir(triple: str) -> str:
    """The complete pool module for ``triple`` as LLVM IR text.

    Example::

        >>> "llvm.x86.sse2.pause" in pool_ir("x86_64-unknown-linux-gnu")
        True
    """
    decl, call = pause_ir(triple)
    text = (_TEMPLATE.replace("@PAUSE_DECL@", decl)
            .replace("@PAUSE_CALL@", call)
            .replace("@SYNC@", str(SYNC_BYTES))
            .replace("@MAXW@", str(MAX_THREADS - 1))
            .replace("@MAX@", str(MAX_THREADS))
            .replace("@CLAIMS@", str(8 * MAX_THREADS))
            .replace("@SPIN@", str(SPIN_ITERATIONS))
            .replace("@YIELD_MASK@", str(YIELD_EVERY - 1)))
    return f'target triple = "{triple}"\n{text}{placement_ir(triple, MAX_THREADS)}'
