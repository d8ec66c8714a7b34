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

A block of at least :data:`HUGE_MIN_PAGES` transparent huge pages (Linux, where the
kernel has them: :func:`huge_page_bytes`) starts on a huge page boundary and is advised
onto huge pages (``madvise(MADV_HUGEPAGE)``, as numpy does for its arrays of 4 MB and
more).  Streaming a 16 MB packed GEMM operand on 4 kB pages misses the TLB every 4 kB
(the second-level TLB covers 8 MB at most): tutorial 04's 2048^3 GEMM ran ~8% slower
than on huge pages.

Example::

    >>> text = workspace_ir()
    >>> "define ptr @cuvil_workspace_alloc(i64 %bytes)" in text
    True
"""

from __future__ import annotations

import sys

#: freed blocks kept for reuse (process-wide)
SLOTS = 8

#: blocks of at least this many huge pages are placed on huge pages
HUGE_MIN_PAGES = 2

#: Linux's MADV_HUGEPAGE (asm-generic/mman-common.h)
_MADV_HUGEPAGE = 14

#: the C ABI, as a generated module declares it
DECLARATIONS = {
    "cuvil_workspace_alloc": "declare ptr @cuvil_workspace_alloc(i64)",
    "cuvil_workspace_free": "declare void @cuvil_workspace_free(ptr)",
}

# a fresh block of ``want`` bytes (a multiple of 64), or null
_PLAIN_MAP = """
define internal ptr @ws_map(i64 %want) alwaysinline {
  %p = call ptr @aligned_alloc(i64 64, i64 %want)
  ret ptr %p
}
"""

# ... where a block of at least @MIN@ bytes starts on a huge page and is advised onto
# huge pages: the TLB then covers a 16 MB packed GEMM operand with 8 entries, not 4096
_HUGE_MAP = """
declare i32 @madvise(ptr, i64, i32)

define internal ptr @ws_map(i64 %want) {
entry:
  %large = icmp uge i64 %want, @MIN@
  br i1 %large, label %huge, label %plain
plain:
  %p = call ptr @aligned_alloc(i64 64, i64 %want)
  ret ptr %p
huge:
  %sum = add i64 %want, @MASK@
  %wrapped = icmp ult i64 %sum, %want
  br i1 %wrapped, label %none, label %round
round:
  %size = and i64 %sum, @NEG@
  %h = call ptr @aligned_alloc(i64 @HUGE@, i64 %size)
  %null = icmp eq ptr %h, null
  br i1 %null, label %none, label %advise
advise:
  %ignored = call i32 @madvise(ptr %h, i64 %size, i32 @MADV@)
  ret ptr %h
none:
  ret ptr null
}
"""

_TEMPLATE = """
@ws_slots = internal global [@SLOTS@ x ptr] zeroinitializer, align 64

declare ptr @aligned_alloc(i64, i64)
declare void @free(ptr)
@MAP@

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
  %base = call ptr @ws_map(i64 %want)
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


def workspace_ir(huge: int | None = None) -> str:
    """The workspace cache's functions as LLVM IR text (no target triple: it is linked
    into the thread pool's module).  ``huge``: the huge page size in bytes (default
    :func:`huge_page_bytes`); 0 leaves every block on ordinary pages.

    Example::

        >>> "@ws_slots = internal global [8 x ptr]" in workspace_ir()
        True
    """
    huge = huge_page_bytes() if huge is None else huge
    if huge:
        fresh = (_HUGE_MAP.replace("@MIN@", str(HUGE_MIN_PAGES * huge))
                 .replace("@MASK@", str(huge - 1)).replace("@NEG@", str(-huge))
                 .replace("@HUGE@", str(huge)).replace("@MADV@", str(_MADV_HUGEPAGE)))
    else:
        fresh = _PLAIN_MAP
    return _TEMPLATE.replace("@SLOTS@", str(SLOTS)).replace("@MAP@", fresh)


def huge_page_bytes() -> int:
    """The size of a transparent huge page of this process's kernel, or 0 where there
    are none (not Linux, or THP set to ``never``).  The workspace cache runs in this
    process, so this is a property of the host, read from
    ``/sys/kernel/mm/transparent_hugepage``.

    Example::

        >>> huge_page_bytes() % 4096
        0
    """
    if not sys.platform.startswith("linux"):
        return 0
    root = "/sys/kernel/mm/transparent_hugepage/"
    try:
        with open(root + "enabled") as f:
            if "[never]" in f.read():
                return 0
        with open(root + "hpage_pmd_size") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 0
