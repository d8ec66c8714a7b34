"""Bank conflicts between cores in a shared memory (the Ascend-like L2), in the
simulator.

Within a core, an instruction waits for a bank another of its engines holds (the
per-core bank table of :mod:`~targets.accel.hal`).  A shared memory's banks are one for
all cores, so an instruction also waits while another core's instruction holds a bank
it touches.  The simulator runs the cores one after another over the same cycles (the
host issues each core's instructions in turn), so each shared bank keeps a calendar of
the intervals instructions held it and which core's they were: an instruction starts
at the earliest cycle from its ready time at which no other core holds any shared bank
it touches for its whole duration, and then holds those banks itself.  The cycles it
waited are ``shared_bank_stalls`` (a cause of its own, besides
``bank_conflict_stalls`` within a core and ``bandwidth_stalls`` on the shared links).

Example::

    >>> from targets.accel.examples.ascend_like import ascend
    >>> shared_bank_ids(ascend)
    [0, 1, 2, 3, 4, 5, 6, 7]
    >>> "cvl_shared_slot" in shared_banks_c(ascend, 32)
    True
"""

from __future__ import annotations

SCAL_MAX = 1 << 12          # intervals kept per shared bank


def shared_bank_ids(acc) -> list:
    """The simulator's bank numbers of ``acc``'s shared memories (banks are numbered
    memory after memory, in description order)."""
    out, first = [], 0
    for m in acc.memories_only:
        if acc.cores is not None and acc.cores.is_shared(m.scope):
            out += range(first, first + m.banks)
        first += m.banks
    return out


def shared_banks_c(acc, nbanks: int) -> str:
    """``cvl_shared_slot`` (the earliest start free of other cores' holds),
    ``cvl_shared_hold`` (record one), ``cvl_shared_reset`` and the stall counter."""
    ids = shared_bank_ids(acc)
    if not ids:
        return """int64_t cvl_sbank_stalls;
static int64_t cvl_shared_slot(const int *lo, const int *hi, int nr, int64_t t, int64_t c) {
    (void)lo; (void)hi; (void)nr; (void)c; return t;
}
static void cvl_shared_hold(const int *lo, const int *hi, int nr, int64_t t, int64_t c) {
    (void)lo; (void)hi; (void)nr; (void)t; (void)c;
}
static void cvl_shared_reset(void) { cvl_sbank_stalls = 0; }"""
    index = ", ".join(str(ids.index(b)) if b in ids else "-1" for b in range(nbanks))
    ns = len(ids)
    return f"""int64_t cvl_sbank_stalls;
static const int cvl_sbank[{nbanks}] = {{{index}}};
static int64_t cvl_scal[{ns}][{SCAL_MAX}][3];    /* start, end, core */
static int cvl_scal_n[{ns}];
static void cvl_shared_reset(void) {{
    memset(cvl_scal_n, 0, sizeof cvl_scal_n); cvl_sbank_stalls = 0;
}}
/* the earliest s >= t at which no other core holds a shared bank of the ranges for
   c cycles */
static int64_t cvl_shared_slot(const int *lo, const int *hi, int nr, int64_t t, int64_t c) {{
    int64_t t0 = t;
    for (int again = 1; again;) {{
        again = 0;
        for (int r = 0; r < nr; ++r)
            for (int b = lo[r]; b <= hi[r]; ++b) {{
                int k = cvl_sbank[b];
                if (k < 0) continue;
                for (int i = 0; i < cvl_scal_n[k]; ++i) {{
                    const int64_t *v = cvl_scal[k][i];
                    if (v[2] != cvl_core && v[0] < t + c && t < v[1]) {{ t = v[1]; again = 1; }}
                }}
            }}
    }}
    cvl_sbank_stalls += t - t0;
    return t;
}}
/* this core holds the shared banks of the ranges over [t, t + c); a full calendar
   forgets its oldest half (later instructions may then miss a conflict) */
static void cvl_shared_hold(const int *lo, const int *hi, int nr, int64_t t, int64_t c) {{
    for (int r = 0; r < nr; ++r)
        for (int b = lo[r]; b <= hi[r]; ++b) {{
            int k = cvl_sbank[b];
            if (k < 0 || c <= 0) continue;
            if (cvl_scal_n[k] == {SCAL_MAX}) {{
                memmove(cvl_scal[k], cvl_scal[k][{SCAL_MAX // 2}],
                        sizeof cvl_scal[k][0] * {SCAL_MAX // 2});
                cvl_scal_n[k] = {SCAL_MAX // 2};
            }}
            int64_t *v = cvl_scal[k][cvl_scal_n[k]++];
            v[0] = t; v[1] = t + c; v[2] = cvl_core;
        }}
}}"""


__all__ = ["SCAL_MAX", "shared_bank_ids", "shared_banks_c"]
