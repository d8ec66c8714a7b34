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


def _tiles(f, block, m):
    from schedules.tune.space import _register_options
    return _register_options(tree.get(f, tree.find_block(f, block)), m)[2]


def test_a_sliding_window_leaves_registers_free():
    """A 3x3 convolution's window reuses its broadcasts across steps, which LLVM keeps
    in registers: tiles needing 31 of AVX-512's 32 registers spilled accumulators and
    ran 1.6 to 2.9x slower, so they leave an eighth free (4) for it; a GEMM's do not,
    and the pruning refuses what the space no longer offers.  The output channels
    pad by at most a quarter (no 3 vectors of 16 on 64 channels: 1.5 times the work)."""
    from schedules.tune.networks import matmul
    m = machine_of("llvm -mcpu=skylake-avx512")

    def need(t):
        return -(-t[0] * t[1] * t[2] // 16) + t[2] // 16 + 1
    conv = _tiles(conv2d(64, 64, 56, 56), "Y", m)
    assert max(need(t) for t in conv) <= 28 and (1, 14, 32) not in conv
    assert (1, 8, 32) in conv and not any(t[2] == 48 for t in conv)
    wide = _tiles(conv2d(8, 128, 56, 56), "Y", m)      # 48 of 128 channels: 144
    assert max(need(t) for t in wide) == 28 and (1, 8, 48) in wide
    gemm = _tiles(matmul(256, 256, 256), "C", m)
    assert (6, 64) in gemm and max(r + -(-v // 16) * (r + 1) + 1 for r, v in gemm) >= 29
    f = conv2d(8, 32, 14, 14)
    sch = S.Schedule(f)
    ko, y, x, *red = sch.get_loops(sch.get_block("Y"))
    acc = sch.cache_write(sch.get_block("Y"), 0, "local")
    # 1 x 14 x 32: 28 accumulators, 2 operand vectors and a broadcast: 31 registers
    sch.reorder(y, *red, x, ko)
    sch.reverse_compute_at(acc, y)
    sch.unroll(x)
    sch.vectorize(ko)
    assert "and 4 for its sliding window, 32 exist" in prune(sch.func, m)


def _symbolic_conv():
    """A 3x3 convolution of ``n`` input channels (weights of a size known at run time)."""
    import cuvil_tir as T
    n = T.size_var("n")
    X = T.placeholder((n, 8, 8), name="X")
    W = T.placeholder((16, n, 3, 3), name="W")
    rc, ry, rx = (T.reduce_axis((0, e), name=v) for e, v in ((n, "rc"), (3, "ry"), (3, "rx")))
    return T.create_prim_func([X, W, T.compute((16, 6, 6), lambda k, y, x: T.sum(
        X[rc, y + ry, x + rx] * W[k, rc, ry, rx], axis=[rc, ry, rx]), name="Y")])


def _pack_under(func, block):
    """The loop vars above ``block``."""
    return [lp.loop_var for _, lp in tree.loops_above(func, tree.find_block(func, block))]


def test_weights_larger_than_l2_are_packed_panel_by_panel():
    """A convolution whose weights exceed L2 packs them inside its loop over the weight
    panels (under the parallel loop, which also runs the kernel) rather than once at
    the root, where the packed copy goes to memory and back (ResNet-18's layer4: 9.4 MB
    of weights): in every candidate whose outer spatial tiles put no loop between the
    two panel loops (one there would pack each panel again per iteration).  The
    candidates compute the convolution; with an L2 holding the weights, or on a GEMM,
    the pack stays at the root."""
    import dataclasses
    from schedules.tune.networks import matmul
    from schedules.tune.space import offers_panel_packing
    f = conv2d(16, 32, 6, 6)                       # 18 KiB of weights
    big = machine_of(HASWELL)
    small = dataclasses.replace(big, l2_bytes=16384)
    assert offers_panel_packing(f, "Y", small) and not offers_panel_packing(f, "Y", big)
    assert not offers_panel_packing(matmul(64, 64, 64), "C", dataclasses.replace(
        big, l2_bytes=1024))
    sym = _symbolic_conv()                          # weights of a size unknown here
    assert not offers_panel_packing(sym, "Y", dataclasses.replace(big, l2_bytes=16))
    generated_space(sym, dataclasses.replace(big, l2_bytes=16))(S.Schedule(sym, seed=0))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 6, 6), "float32")
    w = rng.standard_normal((32, 16, 3, 3), "float32")
    inside = outside = 0
    for seed in range(16):
        sch = S.Schedule(f, seed=seed)
        generated_space(f, small)(sch)
        above, kernel = _pack_under(sch.func, "W_global"), _pack_under(sch.func, "Y_update")
        loops = [lp for _, lp in tree.loops_above(sch.func, tree.find_block(
            sch.func, "Y_update"))]
        # ko_0_0 y_0_0 x_0_0 ko_0_1: the spatial tiles between the two panel loops
        between = [lp.extent.value for lp in loops[1:3]]
        if between != [1, 1]:
            assert above[0] is not kernel[0], seed      # at the root
            outside += 1
            continue
        inside += 1
        assert above[:4] == kernel[:4] and len(above) == 8, seed
        packs = [lp for _, lp in tree.loops_above(sch.func, tree.find_block(
            sch.func, "W_global"))]
        assert packs[0].kind == "parallel" and packs[-1].kind == "serial"
        y = np.zeros((32, 6, 6), "float32")
        targets.build(sch, HASWELL)(x, w, y)
        np.testing.assert_allclose(y, _want(x, w, 1, 1), rtol=1e-4, atol=1e-4)
    assert inside >= 2 and outside >= 1, (inside, outside)
    for seed in range(4):
        sch = S.Schedule(f, seed=seed)
        generated_space(f, big)(sch)
        assert _pack_under(sch.func, "W_global")[0] is not _pack_under(sch.func, "Y_update")[0]


def _chunked(sch) -> bool:
    """Whether the candidate swept its reduction in chunks outside its spatial tiles:
    a reduce loop of the update sits above a spatial tile loop that is no part of its
    register tile."""
    path = tree.find_block(sch.func, "Y_update")
    realize = tree.get(sch.func, path)
    kinds = {}
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        for v in used_vars(val):
            kinds[v.name] = iv.kind
    loops = [lp for _, lp in tree.loops_above(sch.func, path)]
    order = [kinds.get(lp.loop_var.name) for lp in loops if lp.kind in ("serial", "parallel")
             and lp.extent.value > 1]
    return "reduce" in order and "spatial" in order[order.index("reduce"):]


def test_weights_larger_than_l2_may_be_swept_in_reduction_chunks():
    """A convolution whose weights exceed the declared L2 is offered, as a decision,
    its reduction in chunks outside its spatial tiles (each chunk of a weight panel in
    L1 for every register tile of the panel, the accumulator the panel's spatial tile);
    both kinds of candidates compute the convolution, a padded panel (20 output
    channels in vectors of 8) too.  Weights that fit L2, a GEMM and weights of a
    symbolic size are not offered the decision."""
    import dataclasses
    from schedules.tune.networks import matmul
    from schedules.tune.reduction_chunks import chunk_sizes
    from schedules.tune.space import offers_reduction_chunks
    big = machine_of(HASWELL)
    small = dataclasses.replace(big, l2_bytes=4096, l1d_bytes=2048)
    assert offers_reduction_chunks(conv2d(16, 32, 6, 6), "Y", small)
    assert not offers_reduction_chunks(conv2d(16, 32, 6, 6), "Y", big)
    assert not offers_reduction_chunks(matmul(64, 64, 64), "C", small)
    assert not offers_reduction_chunks(_symbolic_conv(), "Y", small)
    assert chunk_sizes([16, 3, 3], 16 * 4, 2048) == [1, 3, 3]
    rng = np.random.default_rng(0)
    for k in (32, 20):
        f = conv2d(16, k, 6, 6)
        x = rng.standard_normal((16, 6, 6), "float32")
        w = rng.standard_normal((k, 16, 3, 3), "float32")
        seen = set()
        for seed in range(6):
            sch = S.Schedule(f, seed=seed)
            generated_space(f, small)(sch)
            seen.add(_chunked(sch))
            y = np.zeros((k, 6, 6), "float32")
            targets.build(sch, HASWELL)(x, w, y)
            np.testing.assert_allclose(y, _want(x, w, 1, 1), rtol=1e-4, atol=1e-4)
        assert seen == {True, False}, (k, seen)
        for seed in range(3):                     # weights in L2: never chunked
            sch = S.Schedule(f, seed=seed)
            generated_space(f, big)(sch)
            assert not _chunked(sch)


def test_a_small_output_plane_with_weights_beyond_l2_may_be_a_gemm_over_its_positions():
    """A convolution whose weights exceed the declared L2 and whose output positions fit
    four vectors (ResNet-18's layer4: 49 positions, 9.4 MB of weights) is offered, as
    one more choice of its categorical, its positions fused into the vector axis and
    padded to whole vectors, the window read staged as im2col columns and the weights
    read unpacked as broadcasts (their per-call pack took a third of layer4's call).
    Its candidates compute the convolution, a guarded row tile too (21 output channels
    in tiles of 2) and a stride-2 one, and pass the pruning.  A larger plane, weights
    that fit L2, a GEMM and weights of a symbolic size are not offered it."""
    import dataclasses
    from schedules.tune.decisions import run_with_decisions
    from schedules.tune.im2col_rule import im2col_choices
    from schedules.tune.networks import matmul
    big = machine_of(HASWELL)                          # 8 lanes, 16 registers
    small = dataclasses.replace(big, l2_bytes=4096)
    avx512 = machine_of("llvm -mcpu=skylake-avx512")
    layer4, = im2col_choices(conv2d(512, 512, 7, 7), "Y", avx512)
    assert (layer4.vectors, layer4.tiles[-1]) == (4, (6, 4))
    assert not im2col_choices(conv2d(256, 256, 14, 14), "Y", avx512)   # 196 positions
    assert not im2col_choices(conv2d(16, 32, 5, 5), "Y", big)
    assert not im2col_choices(conv2d(16, 32, 6, 6), "Y", small)       # 36: 5 vectors
    assert not im2col_choices(matmul(64, 64, 64), "C", small)
    assert not im2col_choices(_symbolic_conv(), "Y", small)
    rng = np.random.default_rng(0)
    for k, stride in ((32, 1), (21, 1), (32, 2)):     # 5 x 5 positions
        f = conv2d(16, k, 5 * stride, 5 * stride, 3, 3, stride, 1)
        choices = im2col_choices(f, "Y", small)
        assert [c.tiles for c in choices] == [((1, 4), (2, 4))]
        space = generated_space(f, small, recipes={"Y": choices})
        x = rng.standard_normal((16, 5 * stride, 5 * stride), "float32")
        w = rng.standard_normal((k, 16, 3, 3), "float32")
        drawn = set()
        for seed in range(8):
            sch = S.Schedule(f, seed=seed)
            space(sch)
            drawn.add("P_reindex" in str(sch.func))
        assert drawn == {True, False}, (k, drawn)
        for rows in (1, 2):                               # the im2col choice, its rows
            sch = run_with_decisions(space, f, [1, rows - 1])
            assert "W_global" not in str(sch.func)        # the weights read unpacked
            assert prune(sch.func, small) is None, rows
            loops = [lp for _, lp in tree.loops_above(sch.func, tree.find_block(
                sch.func, "Y_update"))]
            assert loops[0].kind == "parallel" and loops[-1].kind == "vectorized"
            assert [lp.extent.value for lp in loops[-3:]] == [rows, 4, 8]
            y = np.zeros((k, 5, 5), "float32")
            targets.build(sch, HASWELL)(x, w, y)
            np.testing.assert_allclose(y, _want(x, w, stride, 1), rtol=1e-4, atol=1e-4)
