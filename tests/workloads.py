"""Workloads shared by the test suites: te-built PrimFuncs with numpy references.

Each builder returns a ``Workload``: the PrimFunc, a function making random inputs
(numpy arrays in argument order, outputs zero-filled), and the numpy reference that
returns the expected outputs keyed by argument index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import cuvil_tir as T


@dataclass
class Workload:
    name: str
    func: T.PrimFunc
    make_inputs: Callable[[np.random.Generator], list]
    reference: Callable[[list], dict]  # arrays -> {arg index: expected array}
    rtol: float = 1e-5
    atol: float = 1e-5

    def check(self, arrays) -> None:
        expected = self.reference(arrays)
        for idx, want in expected.items():
            np.testing.assert_allclose(arrays[idx], want, rtol=self.rtol, atol=self.atol,
                                       err_msg=f"{self.name}: output {idx}")


def _rand(rng, shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def elementwise_chain(n: int = 64) -> Workload:
    """``D = relu(A * B + C)`` via two stages: mul-add, then relu."""
    A = T.placeholder((n,), name="A")
    B = T.placeholder((n,), name="B")
    C = T.placeholder((n,), name="C")
    E = T.compute((n,), lambda i: A[i] * B[i] + C[i], name="E")
    D = T.compute((n,), lambda i: T.max(E[i], 0.0), name="D")
    f = T.create_prim_func([A, B, C, D])
    return Workload("elementwise_chain", f,
                    lambda r: [_rand(r, n), _rand(r, n), _rand(r, n), np.zeros(n, "float32")],
                    lambda a: {3: np.maximum(a[0] * a[1] + a[2], 0)})


def matmul(m: int = 16, n: int = 16, k: int = 16, dtype: str = "float32") -> Workload:
    """``C[i, j] = sum_k A[i, k] * B[k, j]``."""
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    f = T.create_prim_func([A, B, C])
    return Workload("matmul", f,
                    lambda g: [_rand(g, (m, k), dtype), _rand(g, (k, n), dtype),
                               np.zeros((m, n), dtype)],
                    lambda a: {2: a[0].astype("float64") @ a[1].astype("float64")},
                    rtol=1e-4, atol=1e-4)


def matmul_bias_relu(m: int = 16, n: int = 16, k: int = 16) -> Workload:
    """``D = relu(A @ B + bias)`` with the matmul as an intermediate stage."""
    A = T.placeholder((m, k), name="A")
    B = T.placeholder((k, n), name="B")
    bias = T.placeholder((n,), name="bias")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = T.compute((m, n), lambda i, j: T.max(C[i, j] + bias[j], 0.0), name="D")
    f = T.create_prim_func([A, B, bias, D])
    return Workload("matmul_bias_relu", f,
                    lambda g: [_rand(g, (m, k)), _rand(g, (k, n)), _rand(g, (n,)),
                               np.zeros((m, n), "float32")],
                    lambda a: {3: np.maximum(a[0].astype("float64") @ a[1] + a[2], 0)},
                    rtol=1e-4, atol=1e-4)


def batch_matmul(b: int = 2, m: int = 8, n: int = 8, k: int = 8) -> Workload:
    """``C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]``."""
    A = T.placeholder((b, m, k), name="A")
    B = T.placeholder((b, k, n), name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((b, m, n), lambda bb, i, j: T.sum(A[bb, i, r] * B[bb, r, j], axis=r),
                  name="C")
    f = T.create_prim_func([A, B, C])
    return Workload("batch_matmul", f,
                    lambda g: [_rand(g, (b, m, k)), _rand(g, (b, k, n)),
                               np.zeros((b, m, n), "float32")],
                    lambda a: {2: np.matmul(a[0].astype("float64"), a[1])},
                    rtol=1e-4, atol=1e-4)


def conv2d_nchw(n: int = 1, c: int = 3, h: int = 8, w: int = 8, k: int = 4,
                r: int = 3, pad: int = 1) -> Workload:
    """3x3 (r x r) conv2d, stride 1, zero padding via ``T.if_then_else``."""
    X = T.placeholder((n, c, h, w), name="X")
    W = T.placeholder((k, c, r, r), name="W")
    oh, ow = h + 2 * pad - r + 1, w + 2 * pad - r + 1
    rc = T.reduce_axis((0, c), name="rc")
    ry = T.reduce_axis((0, r), name="ry")
    rx = T.reduce_axis((0, r), name="rx")
    P = T.compute((n, c, h + 2 * pad, w + 2 * pad),
                  lambda b, ci, y, x: T.if_then_else(
                      T.all(y >= pad, y < h + pad, x >= pad, x < w + pad),
                      X[b, ci, y - pad, x - pad], 0.0), name="pad")
    Y = T.compute((n, k, oh, ow),
                  lambda b, f, y, x: T.sum(P[b, rc, y + ry, x + rx] * W[f, rc, ry, rx],
                                           axis=[rc, ry, rx]), name="conv")
    func = T.create_prim_func([X, W, Y])

    def ref(a):
        x, wt = a[0].astype("float64"), a[1].astype("float64")
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        out = np.zeros((n, k, oh, ow))
        for dy in range(r):
            for dx in range(r):
                patch = xp[:, :, dy:dy + oh, dx:dx + ow]
                out += np.einsum("nchw,kc->nkhw", patch, wt[:, :, dy, dx])
        return {2: out}

    return Workload("conv2d_nchw", func,
                    lambda g: [_rand(g, (n, c, h, w)), _rand(g, (k, c, r, r)),
                               np.zeros((n, k, oh, ow), "float32")],
                    ref, rtol=1e-4, atol=1e-4)


def conv2d_nhwc_ref(x, w):
    """Valid, stride-1 conv2d of NHWC ``x`` by HWIO ``w`` in int32 (the accelerator
    examples' convolution), by numpy."""
    kh, kw = w.shape[:2]
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    return sum(np.einsum("nyxc,ck->nyxk", x[:, r:r + oh, s:s + ow].astype("int32"),
                         w[r, s].astype("int32")) for r in range(kh) for s in range(kw))


def softmax(m: int = 8, n: int = 16) -> Workload:
    """Row softmax in four stages: max, exp, sum, divide."""
    A = T.placeholder((m, n), name="A")
    k1 = T.reduce_axis((0, n), name="k")
    mx = T.compute((m,), lambda i: T.max(A[i, k1], axis=k1), name="row_max")
    ex = T.compute((m, n), lambda i, j: T.exp(A[i, j] - mx[i]), name="exp")
    k2 = T.reduce_axis((0, n), name="k")
    sm = T.compute((m,), lambda i: T.sum(ex[i, k2], axis=k2), name="row_sum")
    out = T.compute((m, n), lambda i, j: ex[i, j] / sm[i], name="softmax")
    f = T.create_prim_func([A, out])

    def ref(a):
        x = a[0].astype("float64")
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return {1: e / e.sum(axis=1, keepdims=True)}

    return Workload("softmax", f,
                    lambda g: [_rand(g, (m, n)), np.zeros((m, n), "float32")], ref)


ALL = {
    "elementwise_chain": elementwise_chain,
    "matmul": matmul,
    "matmul_bias_relu": matmul_bias_relu,
    "batch_matmul": batch_matmul,
    "conv2d_nchw": conv2d_nchw,
    "softmax": softmax,
}


def load_script(relative_path: str):
    """A repository script (``benchmarks/run.py``, ``tutorials/04_...py``) imported as a
    module, without running its ``__main__`` part."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / relative_path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
