"""fp8 (e4m3) operands on the Gemmini-like NPU, stored as bytes and decoded by the
matmul intrinsic's desc: every one of the 256 encodings decodes as the formula, and a
GEMM whose sums are exact in float32 is bit-exact against numpy."""

import numpy as np
import pytest

import targets
from targets.accel.examples.gemmini_like import gemmini
from targets.toolkit.npu.gemm import gemm_fp8, schedule_gemm

FP8 = dict(gemm="gemmini.matmul_16x16x16_e4m3", zero=None,
           scopes=("gem.spad", "gem.spad", "gem.acc"))


def _decode(b):
    """e4m3 by numpy: sign, exponent bias 7, 3 mantissa bits (NaN codes not special)."""
    b = b.astype(np.int64)
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    mag = np.where(e == 0, m * 2.0 ** -9, (8 + m) * 2.0 ** (e - 10))
    return np.where(s == 1, -mag, mag)


def _build(n, double):
    targets.register_target(gemmini, replace=True)
    return targets.build(schedule_gemm(gemm_fp8(n), tile=min(n, 64), double=double, **FP8),
                         "gemmini-like", name=f"fp8_{n}")


def test_every_e4m3_code_decodes_exactly():
    mod = _build(16, False)
    a = np.arange(256, dtype=np.uint8).reshape(16, 16)
    one = np.where(np.eye(16, dtype=bool), 0x38, 0).astype(np.uint8)    # 1.0 on the diagonal
    c = np.zeros((16, 16), "float32")
    mod(a, one, c)
    np.testing.assert_array_equal(c, _decode(a).astype("float32"))
    assert _decode(np.array([0x38, 0xB8, 0x7E, 0x01]), ).tolist() == [1.0, -1.0, 448.0, 2.0 ** -9]


@pytest.mark.parametrize("n,double", [(64, True), (128, False)])
def test_fp8_gemm_is_exact(n, double):
    mod = _build(n, double)
    rng = np.random.default_rng(5)

    def enc(shape):   # magnitudes 1 .. 15: every sum below is exact in float32
        s, e, m = rng.integers(0, 2, shape), rng.integers(7, 11, shape), rng.integers(0, 8, shape)
        return ((s << 7) | (e << 3) | m).astype(np.uint8)

    a, b = enc((n, n)), enc((n, n))
    c = np.zeros((n, n), "float32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, (_decode(a) @ _decode(b)).astype("float32"))
    assert mod.stats["dma_bytes_in"] == n * n * (n // min(n, 64)) * 2
