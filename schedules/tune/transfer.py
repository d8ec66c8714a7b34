"""Learning across tasks: a new task's cost model starts from the records of the nearest
tasks already tuned on the same CPU, so its first batch is already chosen by a model.

Every record the tuner writes carries the candidate's feature vector (``feat``, of
:data:`FEATURES_VERSION`) and a description of its task (``task``: :func:`describe`):
the *family* (each block's iterator kinds, output dtype and number of operands: a GEMM
of any size is one family, a conv2d another) and its *sizes* (the iterator extents).
:func:`nearest_rows` picks from a database the tasks of the same family nearest in
sizes (log scale), never another family's: the sign of a feature's effect differs
between families (a model trained on fp32 GEMMs ranked the random candidates of an
int8 GEMM at a Spearman correlation of -0.77), so a task with no relative in the
database starts from its own measurements.  It returns their feature rows with their
times grouped by task, as :meth:`.cost_model.CostModel.fit` takes them.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((64, 32), name="A"); B = T.placeholder((32, 16), name="B")
    >>> k = T.reduce_axis((0, 32), name="k")
    >>> C = T.compute((64, 16), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    >>> describe(T.create_prim_func([A, B, C]))
    {'family': 'SSR:float32:2', 'sizes': [64, 16, 32]}
"""

from __future__ import annotations

import json
import math

from cuvil_tir.stmt import BlockRealize

from cuvil_tir.analysis import tree

#: bump when :mod:`.features` changes meaning: older vectors are then not used
FEATURES_VERSION = 6
#: at most this many tasks, and rows, are taken from the database to start a model
NEAREST_TASKS = 6
MAX_ROWS = 1500
#: a new task first measures the best candidates of this many nearest tasks ...
SEED_TASKS = 3
#: ... this many of each
SEED_PER_TASK = 2


def describe(func) -> dict:
    """The family and sizes of ``func``'s task (module doc)."""
    family, sizes = [], []
    for _, s in tree.walk(func):
        if not isinstance(s, BlockRealize) or s.block.name == "root":
            continue
        b = s.block
        kinds = "".join("R" if iv.kind == "reduce" else "S" for iv in b.iter_vars)
        dtype = str(b.writes[0].buffer.dtype) if b.writes else "-"
        family.append(f"{kinds}:{dtype}:{len(b.reads)}")
        for iv in b.iter_vars:
            ext = getattr(iv.dom.extent, "value", None)
            sizes.append(ext if isinstance(ext, int) else 0)
    return {"family": "|".join(family), "sizes": sizes}


def distance(a: dict, b: dict) -> float:
    """How far task ``b`` is from task ``a``: the mean log2 size difference, plus 100
    between families.

    Example::

        >>> distance({"family": "x", "sizes": [64]}, {"family": "x", "sizes": [256]})
        2.0
    """
    sa, sb = a.get("sizes") or [], b.get("sizes") or []
    n = max(len(sa), len(sb), 1)
    sa, sb = sa + [1] * (n - len(sa)), sb + [1] * (n - len(sb))
    d = sum(abs(math.log2(max(1, x)) - math.log2(max(1, y))) for x, y in zip(sa, sb)) / n
    return d + (0.0 if a.get("family") == b.get("family") else 100.0)


def nearest_rows(records, task: dict, workload: str, cpu=None,
                 tasks: int = NEAREST_TASKS, limit: int = MAX_ROWS) -> tuple:
    """``(rows, seconds, groups)`` of the correct measurements in ``records`` of the
    ``tasks`` tasks of ``task``'s family nearest it (not ``workload`` itself; only
    those measured on ``cpu`` when given), at most ``limit`` rows.

    Example::

        >>> recs = [{"workload": "w1", "task": {"family": "f", "sizes": [8]},
        ...          "feat": [1.0], "feat_v": FEATURES_VERSION, "seconds": 1e-3}]
        >>> nearest_rows(recs, {"family": "f", "sizes": [16]}, "w0")
        ([[1.0]], [0.001], ['w1'])
    """
    by_task: dict = {}
    for r in records:
        if r.get("workload") == workload or r.get("seconds") is None or \
                r.get("remeasured") or r.get("feat_v") != FEATURES_VERSION or \
                not r.get("feat") or not isinstance(r.get("task"), dict):
            continue
        if cpu is not None and r.get("cpu") not in (None, cpu):
            continue
        by_task.setdefault(r["workload"], []).append(r)
    order = sorted((w for w in by_task if by_task[w][0]["task"].get("family") ==
                    task.get("family")), key=lambda w: distance(task, by_task[w][0]["task"]))
    rows, secs, groups = [], [], []
    for w in order[:tasks]:
        for r in by_task[w]:
            if len(rows) >= limit:
                break
            rows.append(list(r["feat"]))
            secs.append(r["seconds"])
            groups.append(w)
    return rows, secs, groups


def nearest_decisions(records, task: dict, workload: str, cpu=None,
                      tasks: int = SEED_TASKS, per_task: int = SEED_PER_TASK) -> list:
    """The decisions (lists in call order) of the fastest candidates of the ``tasks``
    tasks of ``task``'s family nearest it (not ``workload`` itself; measured on
    ``cpu`` when given): each task's best first, then each one's second ...  A new
    task measures them first, run through its own space (a tile made for another
    extent becomes the nearest that fits: :mod:`.decisions`), as a tuned library
    starts a new shape from its neighbours' best configurations.

    Example::

        >>> recs = [{"workload": "w1", "task": {"family": "f", "sizes": [8]},
        ...          "decisions": [[0, [2, 4]]], "seconds": 2e-3},
        ...         {"workload": "w1", "task": {"family": "f", "sizes": [8]},
        ...          "decisions": [[0, [4, 2]]], "seconds": 1e-3}]
        >>> nearest_decisions(recs, {"family": "f", "sizes": [16]}, "w0")
        [[[4, 2]], [[2, 4]]]

    A categorical decision comes as its value (:func:`portable`).
    """
    by_task: dict = {}
    for r in records:
        if r.get("workload") == workload or r.get("seconds") is None or \
                r.get("remeasured") or not isinstance(r.get("task"), dict) or \
                r["task"].get("family") != task.get("family") or \
                not isinstance(r.get("decisions"), list):
            continue
        if cpu is not None and r.get("cpu") not in (None, cpu):
            continue
        by_task.setdefault(r["workload"], []).append(r)
    order = sorted(by_task, key=lambda w: distance(task, by_task[w][0]["task"]))[:tasks]
    best = {w: sorted(by_task[w], key=lambda r: r["seconds"])[:per_task] for w in order}
    out, keys = [], set()
    for rank in range(per_task):
        for w in order:
            if rank < len(best[w]):
                dec = portable(best[w][rank])
                key = repr(dec)
                if key not in keys:
                    keys.add(key)
                    out.append(dec)
    return out


def portable(record) -> list:
    """A record's decisions in call order, each categorical one as ``{"value":
    option}`` (read from its trace) rather than an index: another task's options may
    differ (a parallel count drawn from ``[2, 4, 8, 16]`` there, ``[2, 3, 4, 6, 8, 12,
    24]`` here), and :func:`.decisions.run_with_decisions` takes the nearest option.

    Example::

        >>> import json
        >>> t = {"insts": [{"name": "sample_categorical", "inputs": [[2, 4, 16], [1, 1, 1]],
        ...                 "decision": 2}]}
        >>> portable({"decisions": [[0, 2]], "trace": json.dumps(t)})
        [{'value': 16}]
        >>> portable({"decisions": [[0, [4, 2]]], "trace": "not json"})
        [[4, 2]]
    """
    try:
        insts = json.loads(record.get("trace") or "")["insts"]
    except (ValueError, TypeError, KeyError):
        insts = []
    out = []
    for k, d in record["decisions"]:
        inst = insts[k] if isinstance(k, int) and 0 <= k < len(insts) else {}
        options = (inst.get("inputs") or [None])[0] \
            if inst.get("name") == "sample_categorical" else None
        if isinstance(options, list) and isinstance(d, int) and 0 <= d < len(options):
            out.append({"value": options[d]})
        else:
            out.append(d)
    return out


__all__ = ["FEATURES_VERSION", "describe", "portable", "distance", "nearest_decisions", "nearest_rows"]
