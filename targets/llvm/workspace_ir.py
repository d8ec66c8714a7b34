"""The LLVM IR text of the workspace cache: heap buffers of generated code, reused.

A generated function allocates each internal buffer larger than the stack limit on
every call (``Allocate`` in :mod:`targets.llvm.codegen`) and frees it on return.  The
C library hands a large block back to the kernel on ``free`` (glibc trims the top of
its heap above 32 MB and unmaps blocks it mapped), so the next call faults every page
in again: for the packed operands of a 2048^3 GEMM that is 8192 page faults and about
10% of the call.  These two functions, JIT-compiled with the thread pool
(:mod:`targets.llvm.threadpool`), keep up to :data:`SLOTS` freed blocks for the next
calls instead::

    void *cuvil_workspace_alloc(uint64_t bytes);  /* 64-byte aligned, or NULL */
    void  cuvil_workspace_free(void *p);          /* p from cuvil_workspace_alloc */

Each block carries its capacity in a 64-byte header in front of the pointer.  Slots are
taken and filled with one atomic exchange / compare-and-swap each, so concurrent calls
(two threads calling one function, allocations inside parallel tasks) never share a
block: a caller that finds no fitting block allocates a fresh one.  A cached block
serves a request of at least half its capacity (a small buffer never pins a large
block); when every slot is full, a freed block replaces a smaller cached one.  At most
:data:`SLOTS` blocks stay allocated, until
:func:`targets.llvm.threadpool.release_workspace` frees them.

Example::

    >>> text = workspace_ir()
    >>> "define ptr @cuvil_workspace_alloc(i64 %bytes)" in text
    True
"""

from __future__ import annotations

#: freed blocks kept for reuse (process-wide)
SLOTS = 8

#: the C ABI, as a generated module declares it
DECLARATIONS = {
    "cuvil_workspace_alloc": "declare ptr @cuvil_workspace_alloc(i64)",
    "cuvil_workspace_free": "declare void @cuvil_workspace_free(ptr)",
}

_TEMPLATE = """
@ws_slots = internal global [@SLOTS@ x ptr] zeroinitializer, align 64

declare ptr @aligned_alloc(i64, i64)
declare void @free(ptr)

; a cached block of capacity cap serves bytes when bytes <= cap <= 2 * bytes
define ptr @cuvil_workspace_alloc(i64 %bytes) {
entry:
  br label %scan
scan:
  %k = phi i32 [0, %entry], [%k1, %next]
  %done = icmp eq i32 %k, @SLOTS@
  br i1 %done, label %fresh, label %try
try:
  %slot = getelementptr inbounds [@SLOTS@ x ptr], ptr @ws_slots, i32 0, i32 %k
  %p = atomicrmw xchg ptr %slot, ptr null acq_rel
  %empty = icmp eq ptr %p, null
  br i1 %empty, label %next, label %check
check:
  %hdr = getelementptr inbounds i8, ptr %p, i64 -64
  %cap = load i64, ptr %hdr, align 64
  %big = icmp uge i64 %cap, %bytes
  %half = lshr i64 %cap, 1
  %close = icmp ule i64 %half, %bytes
  %fits = and i1 %big, %close
  br i1 %fits, label %hit, label %putback
hit:
  ret ptr %p
putback:
  %r = cmpxchg ptr %slot, ptr null, ptr %p acq_rel acquire
  %ok = extractvalue { ptr, i1 } %r, 1
  br i1 %ok, label %next, label %drop
drop:
  call void @free(ptr %hdr)
  br label %next
next:
  %k1 = add nuw i32 %k, 1
  br label %scan
fresh:
  %total = add i64 %bytes, 64
  %wrapped = icmp ult i64 %total, %bytes
  br i1 %wrapped, label %fail, label %alloc
alloc:
  %rounded = and i64 %total, -64
  %want = add i64 %rounded, 64
  %base = call ptr @aligned_alloc(i64 64, i64 %want)
  %null = icmp eq ptr %base, null
  br i1 %null, label %fail, label %made
made:
  store i64 %rounded, ptr %base, align 64
  %user = getelementptr inbounds i8, ptr %base, i64 64
  ret ptr %user
fail:
  ret ptr null
}

define internal i64 @ws_capacity(ptr %p) alwaysinline {
  %hdr = getelementptr inbounds i8, ptr %p, i64 -64
  %cap = load i64, ptr %hdr, align 64
  ret i64 %cap
}

; an empty slot takes the block; with every slot full, one pass of exchanges leaves
; the larger blocks cached and frees the smallest of them and the block
define void @cuvil_workspace_free(ptr %p) {
entry:
  br label %scan
scan:
  %k = phi i32 [0, %entry], [%k1, %next]
  %done = icmp eq i32 %k, @SLOTS@
  br i1 %done, label %evict, label %try
try:
  %slot = getelementptr inbounds [@SLOTS@ x ptr], ptr @ws_slots, i32 0, i32 %k
  %r = cmpxchg ptr %slot, ptr null, ptr %p acq_rel acquire
  %ok = extractvalue { ptr, i1 } %r, 1
  br i1 %ok, label %kept, label %next
kept:
  ret void
next:
  %k1 = add nuw i32 %k, 1
  br label %scan
evict:
  %j = phi i32 [0, %scan], [%j1, %carry]
  %c = phi ptr [%p, %scan], [%c1, %carry]
  %end = icmp eq i32 %j, @SLOTS@
  br i1 %end, label %release, label %swap
swap:
  %s = getelementptr inbounds [@SLOTS@ x ptr], ptr @ws_slots, i32 0, i32 %j
  %q = atomicrmw xchg ptr %s, ptr %c acq_rel
  %gone = icmp eq ptr %q, null
  br i1 %gone, label %kept, label %compare
compare:
  %cc = call i64 @ws_capacity(ptr %c)
  %cq = call i64 @ws_capacity(ptr %q)
  %smaller = icmp ult i64 %cq, %cc
  br i1 %smaller, label %carry, label %restore
restore:
  %back = atomicrmw xchg ptr %s, ptr %q acq_rel
  br label %carry
carry:
  %c1 = phi ptr [%q, %compare], [%back, %restore]
  %j1 = add nuw i32 %j, 1
  %none = icmp eq ptr %c1, null
  br i1 %none, label %kept, label %evict
release:
  %hdr = getelementptr inbounds i8, ptr %c, i64 -64
  call void @free(ptr %hdr)
  ret void
}

; frees every cached block (Python: targets.llvm.threadpool.release_workspace)
define void @cuvil_workspace_release() {
entry:
  br label %scan
scan:
  %k = phi i32 [0, %entry], [%k1, %next]
  %done = icmp eq i32 %k, @SLOTS@
  br i1 %done, label %out, label %take
take:
  %slot = getelementptr inbounds [@SLOTS@ x ptr], ptr @ws_slots, i32 0, i32 %k
  %p = atomicrmw xchg ptr %slot, ptr null acq_rel
  %empty = icmp eq ptr %p, null
  br i1 %empty, label %next, label %drop
drop:
  %hdr = getelementptr inbounds i8, ptr %p, i64 -64
  call void @free(ptr %hdr)
  br label %next
next:
  %k1 = add nuw i32 %k, 1
  br label %scan
out:
  ret void
}
"""


def workspace_ir() -> str:
    """The workspace cache's functions as LLVM IR text (no target triple: it is linked
    into the thread pool's module).

    Example::

        >>> "@ws_slots = internal global [8 x ptr]" in workspace_ir()
        True
    """
    return _TEMPLATE.replace("@SLOTS@", str(SLOTS))
