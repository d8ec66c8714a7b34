"""An analytic prior for the cost model: a coarse roofline estimate of a candidate's
speed from its :mod:`.features` and what the target's :class:`~cuvil_tir.target.Machine`
declares (lanes, vector registers, L1 and L2 bytes, cores), never from the host.

The dominant block runs at the machine's peak scaled by five shares (each at most 1 but
the lanes of a tensorized step):

* **lanes**: the vector loop's lanes over the machine's (``1 / lanes`` when the
  innermost loop is scalar; more than 1 for a tensorized dot product, whose step
  computes on more elements than its result has lanes);
* **cores**: the parallel iterations over whole waves of the declared cores (3
  iterations on 2 cores use 3 of 4 slots; none in parallel use one core);
* **register tile**: the accumulator vectors over a quarter of the vector registers
  (8 of AVX-512's 32, the independent FMA chains that cover a fused multiply-add's
  latency on two pipes), divided by the pressure when the tile overflows the registers;
* **operand reuse**: a ``rows x vectors`` register tile makes ``rows * vectors``
  FMAs from ``rows + vectors`` loads each reduction step, against the most that a
  tile fitting the registers makes (:func:`best_reuse`), the share its square root
  (one core of this 2-core Xeon, 512^3 fp32: 6 x 4 vectors 168 GFLOP/s, 14 x 2 155,
  6 x 2 148, 28 x 1 133; all 1.0 by the accumulators alone);
* **caches**: the micro-kernel's operands (from the innermost reduction loop in)
  within L1, and the whole reduction's within L2, each halving the share when not;
  and the arithmetic per byte fetched from beyond L2 (:mod:`.traffic`) against what
  the vector pipes need there: ``4 * lanes`` flops a cycle (two FMA pipes) over
  :data:`BEYOND_L2_BYTES_PER_CYCLE` (a 2048^3 GEMM streaming B's panels again for every
  row tile made 3 flops a byte and ran at half the speed of one making 55),

and the other blocks' work (packing, copies) adds to the time.  The score is
``-log2`` of that relative time: 0 at the peak, one less for every halving.  It ranks
candidates before any measurement (the search's first picks with no model) and
enters the model as one more feature, whose difference from the task's mean the trees
can split on.

Example::

    >>> from cuvil_tir.target import Machine
    >>> m = Machine(512, 32, 32768, 1 << 20, 2)
    >>> good = {"vector_lanes": 1.0, "vector_innermost": 1.0, "parallel": _log(4),
    ...         "accumulator_vectors": 12.0, "kernel_in_l1": 1.0, "reduce_in_l2": 1.0}
    >>> bad = dict(good, accumulator_vectors=1.0, parallel=_log(3))
    >>> analytic_score(good, m) > analytic_score(bad, m)
    True
"""

from __future__ import annotations

import math

from cuvil_tir.target import Machine


#: the bytes a core is assumed to fetch from beyond L2 per cycle (L3 or memory; no
#: target declares it)
BEYOND_L2_BYTES_PER_CYCLE = 8.0


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


def _raw(v: float) -> float:
    """Undo the features' ``log2(1 + x)``."""
    return max(0.0, 2.0 ** float(v) - 1.0)


def shares(values: dict, machine: Machine) -> dict:
    """The five shares of the peak (module doc) of a candidate whose features are
    ``values`` (feature name -> value, as :func:`.features.features` computes them).

    Example::

        >>> from cuvil_tir.target import Machine
        >>> s = shares({"parallel": _log(3)}, Machine(512, 32, 32768, 1 << 20, 2))
        >>> s["cores"], s["lanes"]
        (0.75, 0.0625)
    """
    lanes = max(1, machine.vector_bits // 32)
    vec = values.get("vector_lanes", 0.0) if values.get("vector_innermost") else 0.0
    step = values.get("expression_lanes", 0.0)
    # a tensorized step (a dot product of narrower elements: VNNI's 4 int8 products
    # per int32 lane) computes more than one result per output lane
    lane_share = max(min(1.0, max(vec, 1.0 / lanes)), step)
    cores = max(1, machine.cores)
    par = round(_raw(values.get("parallel", 0.0)))
    core_share = par / (math.ceil(par / cores) * cores) if par >= 1 else 1.0 / cores
    acc = values.get("accumulator_vectors", 0.0)
    regs = max(1, machine.vector_registers)
    reg_share = 1.0
    if acc > 0 and step <= 1.0:   # a tensorized step holds its own register tile
        reg_share = min(1.0, acc / max(1.0, regs / 4.0))
        if acc > regs:
            reg_share *= regs / acc   # spills: every extra accumulator goes to memory
    reuse_share = 1.0
    vectors = vec if vec >= 1.0 and step <= 1.0 else 0.0
    rows = acc / vectors if vectors else 0.0
    if rows >= 1.0:
        reuse_share = math.sqrt(min(1.0, acc / (rows + vectors) / best_reuse(regs)))
    cache_share = (1.0 if values.get("kernel_in_l1", 1.0) else 0.5) * \
        (1.0 if values.get("reduce_in_l2", 1.0) else 0.5)
    if "intensity_beyond_l2" in values:
        need = 4.0 * lanes / BEYOND_L2_BYTES_PER_CYCLE
        cache_share *= min(1.0, _raw(values["intensity_beyond_l2"]) / need)
    return {"lanes": lane_share, "cores": core_share, "registers": reg_share,
            "reuse": reuse_share, "caches": cache_share}


def best_reuse(registers: int) -> float:
    """The most FMAs per operand load of a register tile on a machine of ``registers``
    vector registers: ``rows x vectors`` accumulators, ``vectors`` operand vectors and
    a broadcast must fit (``rows * vectors / (rows + vectors)``, at most 4 vectors).

    Example::

        >>> best_reuse(32), best_reuse(16)      # 6 x 4 on AVX-512; 4 x 3 on AVX2
        (2.4, 1.7142857142857142)
    """
    best = 1.0 / 2.0
    for vectors in range(1, 5):
        rows = (registers - vectors - 1) // vectors
        if rows >= 1:
            best = max(best, rows * vectors / (rows + vectors))
    return best


def analytic_score(values: dict, machine: Machine) -> float:
    """``-log2`` of the candidate's estimated time relative to the peak (higher is
    faster; module doc).

    Example::

        >>> from cuvil_tir.target import Machine
        >>> m = Machine(512, 32, 32768, 1 << 20, 2)
        >>> analytic_score({"vector_lanes": 4.0, "vector_innermost": 1.0,   # 6 x 4
        ...                 "parallel": _log(2), "accumulator_vectors": 24.0}, m)
        0.0
        >>> round(analytic_score({"vector_lanes": 1.0, "vector_innermost": 1.0,
        ...                       "parallel": _log(2), "accumulator_vectors": 28.0}, m), 2)
        -0.66
    """
    s = shares(values, machine)
    other = _raw(values.get("other_work", 0.0))   # the other blocks' work per unit
    slow = (1.0 + other) / (s["lanes"] * s["cores"] * s["registers"] * s["reuse"] *
                            s["caches"])
    return 0.0 - math.log2(slow)


__all__ = ["analytic_score", "shares"]
