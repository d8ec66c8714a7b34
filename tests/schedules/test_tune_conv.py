"""The generated space on convolutions: which axis it vectorises, how it stages the
weights, and that its candidates compute the convolution."""

import numpy as np

import schedules as S
import targets
from cuvil_tir.analysis import tree
from cuvil_tir.visitor import used_vars
from schedules.tune.networks import conv2d
from schedules.tune.space import generated_space, machine_of, prune

HASWELL = targets.Target("llvm", mcpu="haswell")


def _want(x, w, stride, pad):
    win = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (pad, pad), (pad, pad))), w.shape[2:], axis=(1, 2))
    return np.einsum("cyxrs,kcrs->kyx", win[:, ::stride, ::stride], w)


def _vector_iterator(func, block="Y_update"):
    """The name of the block iterator that the innermost (vectorised) loop above
    ``block`` moves."""
    path = tree.find_block(func, block)
    inner = [lp for _, lp in tree.loops_above(func, path)][-1]
    assert inner.kind == "vectorized"
    realize = tree.get(func, path)
    return [iv.var.name for iv, val in zip(realize.block.iter_vars, realize.iter_values)
            if any(v is inner.loop_var for v in used_vars(val))]


def test_a_strided_conv_vectorises_its_output_channels_not_its_width():
    """A stride-2 convolution's width (16, whole vectors of 8) is read two apart
    through the window (a gather per vector): the output channels, whose weights are
    packed, are vectorised instead (ResNet-18's first layer: 0.85x numpy's im2col +
    matmul by the width, 2.7x by the channels).  A stride-1 width stays the vector
    axis (contiguous loads of the padded image)."""
    m = machine_of(HASWELL)
    rng = np.random.default_rng(0)
    f = conv2d(4, 8, 32, 32, 3, 3, 2, 1)
    space = generated_space(f, m)
    x = rng.standard_normal((4, 32, 32), "float32")
    w = rng.standard_normal((8, 4, 3, 3), "float32")
    built = 0
    for seed in range(3):
        sch = S.Schedule(f, seed=seed)
        space(sch)
        assert _vector_iterator(sch.func) == ["v_ko"], seed
        if prune(sch.func, m) is None and built < 1:
            y = np.zeros((8, 16, 16), "float32")
            targets.build(sch, HASWELL)(x, w, y)
            np.testing.assert_allclose(y, _want(x, w, 2, 1), rtol=1e-4, atol=1e-4)
            built += 1
    assert built == 1
    f = conv2d(4, 8, 16, 16, 3, 3, 1, 1)
    sch = S.Schedule(f, seed=0)
    generated_space(f, m)(sch)
    assert [n.split("_")[1] for n in _vector_iterator(sch.func)] == ["x"]
