"""Task lists: a network's operators, each with its weight (how often it runs per
inference), as the network task scheduler (:mod:`.scheduler`) tunes them.

A task list is JSON (or the same as a Python dict): ``{"name": ..., "tasks": [{"name",
"op", "args", "weight"}, ...]}``, where ``op`` names a builder of :data:`OPS`
(``matmul``, ``batch_matmul``, ``conv2d``, ``softmax``, ``layernorm``) and ``args`` its
keyword arguments.  Two ship with Cuvil (:data:`BUILTIN`): ResNet-18 at batch 1, 224 x
224 (its distinct convolutions and the dense layer) and BERT-base at sequence length
128 (the GEMMs of attention and the feed-forward layers, the batched attention GEMMs,
softmax and layernorm), in fp32 and with int8 GEMMs accumulating in int32.

Example::

    >>> tasks = load_tasks("resnet18")
    >>> len(tasks), tasks[0].name, tasks[0].weight
    (12, 'conv1', 1)
    >>> sum(t.weight for t in load_tasks("bert-base"))
    108
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import cuvil_tir as T
from cuvil_tir.errors import ArgumentError


def matmul(m, n, k, dtype="float32", acc=None):
    """``C[m, n] = A[m, k] @ B[k, n]`` (``acc``: the accumulator dtype, e.g. int32 for
    int8 operands).

    Example::

        >>> [tuple(int(s) for s in p.shape) for p in matmul(2, 3, 4).params]
        [(2, 4), (4, 3), (2, 3)]
    """
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    if acc is None or acc == dtype:
        C = T.compute((m, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    else:
        C = T.compute((m, n), lambda i, j: T.sum(
            A[i, r].astype(acc) * B[r, j].astype(acc), axis=r), name="C")
    return T.create_prim_func([A, B, C])


def batch_matmul(b, m, n, k, dtype="float32", acc=None):
    """``C[b, m, n] = A[b, m, k] @ B[b, k, n]`` (attention's per-head GEMMs).

    Example::

        >>> len(batch_matmul(2, 4, 4, 8).params)
        3
    """
    A = T.placeholder((b, m, k), dtype, name="A")
    B = T.placeholder((b, k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    if acc is None or acc == dtype:
        C = T.compute((b, m, n), lambda h, i, j: T.sum(A[h, i, r] * B[h, r, j], axis=r),
                      name="C")
    else:
        C = T.compute((b, m, n), lambda h, i, j: T.sum(
            A[h, i, r].astype(acc) * B[h, r, j].astype(acc), axis=r), name="C")
    return T.create_prim_func([A, B, C])


def conv2d(c, k, h, w, r=3, s=3, stride=1, pad=1, dtype="float32"):
    """A ``r x s`` convolution of a ``c x h x w`` image to ``k`` channels (batch 1,
    CHW), with ``stride`` and zero padding ``pad``.

    Example::

        >>> [int(x) for x in conv2d(3, 8, 16, 16, 7, 7, 2, 3).params[-1].shape]
        [8, 8, 8]
    """
    oh, ow = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s) // stride + 1
    X = T.placeholder((c, h, w), dtype, name="X")
    W = T.placeholder((k, c, r, s), dtype, name="W")
    P = T.compute((c, h + 2 * pad, w + 2 * pad), lambda ci, y, x: T.if_then_else(
        T.all(y >= pad, y < h + pad, x >= pad, x < w + pad), X[ci, y - pad, x - pad],
        T.const(0, dtype)), name="P")
    rc = T.reduce_axis((0, c), name="rc")
    ry = T.reduce_axis((0, r), name="ry")
    rx = T.reduce_axis((0, s), name="rx")
    Y = T.compute((k, oh, ow), lambda ko, y, x: T.sum(
        P[rc, y * stride + ry, x * stride + rx] * W[ko, rc, ry, rx], axis=[rc, ry, rx]),
        name="Y")
    return T.create_prim_func([X, W, Y])


def softmax(rows, cols, dtype="float32"):
    """Softmax of each row of a ``rows x cols`` matrix (max, exp, sum, divide).

    Example::

        >>> len(softmax(4, 8).params)
        2
    """
    X = T.placeholder((rows, cols), dtype, name="X")
    k1 = T.reduce_axis((0, cols), name="k1")
    M = T.compute((rows,), lambda i: T.max(X[i, k1], axis=k1), name="M")
    E = T.compute((rows, cols), lambda i, j: T.exp(X[i, j] - M[i]), name="E")
    k2 = T.reduce_axis((0, cols), name="k2")
    Z = T.compute((rows,), lambda i: T.sum(E[i, k2], axis=k2), name="Z")
    Y = T.compute((rows, cols), lambda i, j: E[i, j] / Z[i], name="Y")
    return T.create_prim_func([X, Y])


def layernorm(rows, cols, dtype="float32", eps=1e-5):
    """Layer normalisation of each row with ``gamma`` and ``beta`` (mean, variance,
    normalise).

    Example::

        >>> [p.name for p in layernorm(4, 8).params]
        ['X', 'G', 'Bt', 'Y']
    """
    X = T.placeholder((rows, cols), dtype, name="X")
    G = T.placeholder((cols,), dtype, name="G")
    Bt = T.placeholder((cols,), dtype, name="Bt")
    k1 = T.reduce_axis((0, cols), name="k1")
    S1 = T.compute((rows,), lambda i: T.sum(X[i, k1], axis=k1), name="S1")
    k2 = T.reduce_axis((0, cols), name="k2")
    S2 = T.compute((rows,), lambda i: T.sum(X[i, k2] * X[i, k2], axis=k2), name="S2")
    Y = T.compute((rows, cols), lambda i, j: (X[i, j] - S1[i] / cols) / T.sqrt(
        S2[i] / cols - (S1[i] / cols) * (S1[i] / cols) + eps) * G[j] + Bt[j], name="Y")
    return T.create_prim_func([X, G, Bt, Y])


OPS = {"matmul": matmul, "batch_matmul": batch_matmul, "conv2d": conv2d,
       "softmax": softmax, "layernorm": layernorm}


@dataclass
class Task:
    """One operator of a network: its ``name``, ``weight`` and the unscheduled
    function (``func``), with the ``op`` and ``args`` it was built from.

    Example::

        >>> Task("t", 2, "softmax", {"rows": 2, "cols": 4}).func.params[0].name
        'X'
    """

    name: str
    weight: float
    op: str
    args: dict

    def __post_init__(self):
        if self.op not in OPS:
            raise ArgumentError(f"task {self.name!r}: unknown op {self.op!r}; expected one "
                                f"of {', '.join(OPS)}")
        self.func = OPS[self.op](**self.args)


def _resnet18() -> dict:
    def conv(name, c, k, h, r, stride, pad, weight):
        return {"name": name, "op": "conv2d", "weight": weight,
                "args": {"c": c, "k": k, "h": h, "w": h, "r": r, "s": r,
                         "stride": stride, "pad": pad}}
    return {"name": "resnet18", "tasks": [
        conv("conv1", 3, 64, 224, 7, 2, 3, 1),
        conv("layer1.3x3", 64, 64, 56, 3, 1, 1, 4),
        conv("layer2.down3x3", 64, 128, 56, 3, 2, 1, 1),
        conv("layer2.3x3", 128, 128, 28, 3, 1, 1, 3),
        conv("layer2.down1x1", 64, 128, 56, 1, 2, 0, 1),
        conv("layer3.down3x3", 128, 256, 28, 3, 2, 1, 1),
        conv("layer3.3x3", 256, 256, 14, 3, 1, 1, 3),
        conv("layer3.down1x1", 128, 256, 28, 1, 2, 0, 1),
        conv("layer4.down3x3", 256, 512, 14, 3, 2, 1, 1),
        conv("layer4.3x3", 512, 512, 7, 3, 1, 1, 3),
        conv("layer4.down1x1", 256, 512, 14, 1, 2, 0, 1),
        {"name": "fc", "op": "matmul", "weight": 1, "args": {"m": 1, "n": 1000, "k": 512}},
    ]}


def _bert(int8: bool, seq: int = 128, hidden: int = 768, heads: int = 12,
          ffn: int = 3072, layers: int = 12) -> dict:
    gemm = {"dtype": "int8", "acc": "int32"} if int8 else {}

    def mm(name, m, n, k):
        return {"name": name, "op": "matmul", "weight": layers,
                "args": {"m": m, "n": n, "k": k, **gemm}}
    d = hidden // heads
    return {"name": "bert-base" + ("-int8" if int8 else ""), "tasks": [
        mm("qkv", seq, 3 * hidden, hidden),
        {"name": "scores", "op": "batch_matmul", "weight": layers,
         "args": {"b": heads, "m": seq, "n": seq, "k": d}},
        {"name": "softmax", "op": "softmax", "weight": layers,
         "args": {"rows": heads * seq, "cols": seq}},
        {"name": "context", "op": "batch_matmul", "weight": layers,
         "args": {"b": heads, "m": seq, "n": d, "k": seq}},
        mm("attn_out", seq, hidden, hidden),
        {"name": "layernorm", "op": "layernorm", "weight": 2 * layers,
         "args": {"rows": seq, "cols": hidden}},
        mm("ffn1", seq, ffn, hidden),
        mm("ffn2", seq, hidden, ffn),
    ]}


#: the task lists that ship with Cuvil, by name
BUILTIN = {"resnet18": _resnet18, "bert-base": lambda: _bert(False),
           "bert-base-int8": lambda: _bert(True)}


def load_tasks(source) -> list:
    """The :class:`Task` list of ``source``: a builtin name (:data:`BUILTIN`), a path to
    a JSON task list, or the dict itself (module doc).

    Example::

        >>> load_tasks({"tasks": [{"name": "s", "op": "softmax", "weight": 1,
        ...                        "args": {"rows": 2, "cols": 4}}]})[0].op
        'softmax'
    """
    if isinstance(source, str) and source in BUILTIN:
        data = BUILTIN[source]()
    elif isinstance(source, (str, os.PathLike)):
        try:
            with open(source) as fh:
                data = json.load(fh)
        except (OSError, ValueError) as e:
            raise ArgumentError(f"task list {str(source)!r}: expected one of "
                                f"{', '.join(BUILTIN)} or a JSON file, got {e}") from None
    else:
        data = source
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise ArgumentError("task list: expected {\"tasks\": [{\"name\", \"op\", \"args\", "
                            f"\"weight\"}}, ...]}}, got {type(data).__name__}")
    out = []
    for n, t in enumerate(data["tasks"]):
        try:
            out.append(Task(str(t.get("name", f"task{n}")), t.get("weight", 1),
                            t["op"], dict(t.get("args") or {})))
        except (KeyError, TypeError, AttributeError) as e:
            raise ArgumentError(f"task list: task {n} ({t!r}) is not {{\"name\", \"op\", "
                                f"\"args\", \"weight\"}}: {e}") from None
    return out


def task_list_json(name: str) -> str:
    """A builtin task list as JSON text, a starting point for one's own network.

    Example::

        >>> json.loads(task_list_json("resnet18"))["name"]
        'resnet18'
    """
    return json.dumps(BUILTIN[name](), indent=1)


__all__ = ["BUILTIN", "OPS", "Task", "batch_matmul", "conv2d", "layernorm", "load_tasks",
           "matmul", "softmax", "task_list_json"]
