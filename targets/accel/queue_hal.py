"""The simulator's queues between engines (C, generated from the description).

Each ``(src, dst, id)`` channel keeps the time each outstanding token was pushed and
the time of each of its last pops.  A pop waits for its token (``dependency_stalls``
of the popping engine); the ``n``-th push into a channel of depth ``D`` waits until
the ``(n - D)``-th pop has happened (``queue_full_stalls`` of the pushing engine).
The host issues both in program order and the build proved that program order never
holds more than ``D`` tokens in a channel, so that pop is always known when the push
is simulated.

Example::

    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> "toy_npu_push(int32_t src" in queue_ops(toy_npu)
    True
"""

from __future__ import annotations


def _geometry(acc) -> tuple:
    """``(engines, channels per pair, ring size)``."""
    qs = acc.queues.values()
    return (len(acc.engines), max((q.ids for q in qs), default=1),
            max((q.depth for q in qs), default=1))


def queue_geometry(acc) -> tuple:
    """``(channels, ring size)`` of the simulator's queue state (``cvl_qtok`` ...).

    Example::

        >>> from targets.accel.examples.toy_npu import toy_npu
        >>> queue_geometry(toy_npu)[0] % len(toy_npu.engines) ** 2
        0
    """
    ne, ids, ring = _geometry(acc)
    return ne * ne * ids, ring


def queue_state(acc) -> str:
    """The C state of every channel, and ``cvl_queue_reset``."""
    ne, ids, ring = _geometry(acc)
    depth = ", ".join("{" + ", ".join(str(acc.queues[s, d].depth if s != d else 1)
                                      for d in acc.engines) + "}" for s in acc.engines)
    n = ne * ne * ids
    return f"""static const int64_t cvl_qdepth[{ne}][{ne}] = {{{depth}}};
static int64_t cvl_qtok[{n}][{ring}], cvl_qpop[{n}][{ring}], cvl_qpushes[{n}], cvl_qpops[{n}];
static void cvl_queue_reset(void) {{
    memset(cvl_qtok, 0, sizeof cvl_qtok); memset(cvl_qpop, 0, sizeof cvl_qpop);
    memset(cvl_qpushes, 0, sizeof cvl_qpushes); memset(cvl_qpops, 0, sizeof cvl_qpops);
}}"""


def queue_ops(acc) -> str:
    """``<hal>_push`` and ``<hal>_pop`` with the cycle model of the module doc; a
    channel used out of order sets the simulator's error 3."""
    h = acc.hal
    ne, ids, ring = _geometry(acc)
    return f"""static int cvl_channel(int32_t src, int32_t dst, int32_t id) {{
    if (src < 0 || src >= {ne} || dst < 0 || dst >= {ne} || id < 0 || id >= {ids}) {{
        cvl_sim_stats.error = 3; return -1;
    }}
    return (src * {ne} + dst) * {ids} + id;
}}
int32_t {h}_push(int32_t src, int32_t dst, int32_t id) {{
    int c = cvl_channel(src, dst, id);
    if (c < 0) return 0;
    int64_t depth = cvl_qdepth[src][dst], n = cvl_qpushes[c];
    int64_t t = cvl_clock[src] > cvl_ready[src] ? cvl_clock[src] : cvl_ready[src];
    if (cvl_done[src] > t) t = cvl_done[src];   /* what it issued has completed */
    if (n - cvl_qpops[c] >= depth) {{ cvl_sim_stats.error = 3; return 0; }}
    if (n >= depth) {{      /* full until the (n - depth)-th pop */
        int64_t freed = cvl_qpop[c][(n - depth) % {ring}];
        if (freed > t) {{
            cvl_sim_stats.qfull[src] += freed - t;
            t = freed;
            cvl_ready[src] = t;
        }}
    }}
    cvl_qtok[c][n % {ring}] = t;
    cvl_qpushes[c] = n + 1;
    return 0;
}}
int32_t {h}_pop(int32_t src, int32_t dst, int32_t id) {{
    int c = cvl_channel(src, dst, id);
    if (c < 0) return 0;
    int64_t n = cvl_qpops[c];
    if (n >= cvl_qpushes[c]) {{ cvl_sim_stats.error = 3; return 0; }}
    int64_t tok = cvl_qtok[c][n % {ring}];
    int64_t t = cvl_clock[dst] > cvl_ready[dst] ? cvl_clock[dst] : cvl_ready[dst];
    if (tok > t) {{
        cvl_sim_stats.waits[dst] += tok - t;
        t = tok;
        cvl_ready[dst] = t;
    }}
    cvl_qpop[c][n % {ring}] = t;
    cvl_qpops[c] = n + 1;
    return 0;
}}"""


__all__ = ["queue_geometry", "queue_ops", "queue_state"]
