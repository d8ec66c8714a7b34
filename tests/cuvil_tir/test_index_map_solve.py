"""``index_map.solve``: the block-variable values whose accesses fall in a box,
checked against enumeration."""

import itertools

from hypothesis import given, settings, strategies as st

import cuvil_tir as T
from cuvil_tir.analysis import index_map
from cuvil_tir.stmt import IterVar, Range


def test_a_layout_that_splits_a_fused_index():
    # C[v1, v4] = B[(v1 * 8 + v4) // 16, (v1 * 8 + v4) % 16]: the producer's loop i
    # writes B[i, 0:16], which is what v1 in [2i, 2i + 1] (every v4) reads
    v1, v4, i = T.var("v1"), T.var("v4"), T.var("i")
    ivs = [IterVar(v1, Range.from_extent(6)), IterVar(v4, Range.from_extent(8))]
    e = v1 * 8 + v4
    spans = index_map.solve(ivs, [[e // 16, e % 16]],
                            [[(i, i), (T.const(0), T.const(15))]],
                            {i: Range.from_extent(3)})
    assert [(str(s.lo), str(s.hi), s.extent.value) for s in spans] == [
        ("i * 2", "i * 2 + 1", 2), ("0", "7", 8)]


@settings(max_examples=60, deadline=None)
@given(k=st.sampled_from([2, 4, 8]), mult=st.sampled_from([1, 2, 4]),
       n1=st.integers(1, 6), q=st.integers(0, 5), data=st.data())
def test_split_fused_dims_cover_exactly_what_the_box_holds(k, mult, n1, q, data):
    c = k * mult
    v1, v4 = T.var("v1"), T.var("v4")
    ivs = [IterVar(v1, Range.from_extent(n1)), IterVar(v4, Range.from_extent(k))]
    e = v1 * k + v4
    whole = data.draw(st.booleans())
    rlo, rhi = (0, c - 1) if whole else sorted(
        (data.draw(st.integers(0, c - 1)), data.draw(st.integers(0, c - 1))))
    box = [(T.const(q), T.const(q)), (T.const(rlo), T.const(rhi))]
    spans = index_map.solve(ivs, [[e // c, e % c]], [box], {})
    hits = [(a, b) for a, b in itertools.product(range(n1), range(k))
            if (a * k + b) // c == q and rlo <= (a * k + b) % c <= rhi]
    for pos, s in enumerate(spans):
        lo, hi = s.lo.value, s.hi.value
        # every value that reads inside the box lies in the span
        assert all(lo <= h[pos] <= hi for h in hits)
        if whole and (q + 1) * mult <= n1:
            # the whole quotient block is inside the domain: the span is exact
            assert (lo, hi) == (min(h[pos] for h in hits), max(h[pos] for h in hits))
