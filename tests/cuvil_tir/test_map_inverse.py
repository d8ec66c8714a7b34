"""The one index-map inverse (cuvil_tir.analysis.map_inverse): inverse(map(x)) == x at
every point of the domain, for reshapes of a block's domain into new boxes (constant and
symbolic extents), and its refusals."""

import itertools

import pytest
from hypothesis import given, settings, strategies as st

import cuvil_tir as T
from cuvil_tir.analysis.index_map import NotInvertible
from cuvil_tir.analysis.linear_maps import linear_inverse
from cuvil_tir.analysis.map_inverse import at, index_vars, inverse
from cuvil_tir.analysis.regions import simplify
from cuvil_tir.stmt import IterVar, Range
from cuvil_tir.visitor import substitute


def value(e, env) -> int:
    out = simplify(substitute(e, {v: T.const(x, v.dtype) for v, x in env.items()}))
    assert isinstance(out, T.IntImm), f"{e} at {env} did not fold: {out}"
    return out.value


def check_round_trip(ivs, indices, extra=None):
    """inverse(map(x)) == x for every x of the domain (``extra``: more bindings)."""
    inv = inverse(ivs, indices)
    xs = index_vars(indices)
    extra = extra or {}
    for point in itertools.product(*[range(value(iv.dom.extent, extra)) for iv in ivs]):
        env = {**extra, **{iv.var: p for iv, p in zip(ivs, point)}}
        image = {x: value(e, env) for x, e in zip(xs, indices)}
        back = [value(inv[iv.var], {**extra, **image}) for iv in ivs]
        assert back == list(point), (indices, point, back)


def reshape(vars_, extents, order, dims):
    """The indices of ``vars_`` (in ``order``) fused row-major, then split into
    ``dims`` (a factorization of the product of the extents): a bijection."""
    fused, stride = None, 1
    for k in reversed(order):
        term = vars_[k] if stride == 1 else vars_[k] * stride
        fused = term if fused is None else term + fused
        stride *= extents[k]
    out, inner = [], 1
    for d in reversed(dims):
        part = fused if inner == 1 else fused // inner
        out.append(part if inner * d == stride else part % d)
        inner *= d
    return list(reversed(out))


def factorizations(n, parts):
    if parts == 1:
        return [[n]]
    return [[d] + rest for d in range(1, n + 1) if n % d == 0
            for rest in factorizations(n // d, parts - 1)]


@settings(max_examples=60, deadline=None)
@given(extents=st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1, max_size=3),
       data=st.data())
def test_inverse_of_every_reshape_is_exact_on_the_domain(extents, data):
    vars_ = [T.var(f"v{k}") for k in range(len(extents))]
    ivs = [IterVar(v, Range.from_extent(n)) for v, n in zip(vars_, extents)]
    order = data.draw(st.permutations(range(len(extents))))
    total = 1
    for n in extents:
        total *= n
    dims = data.draw(st.sampled_from(factorizations(total, data.draw(st.integers(1, 3)))))
    check_round_trip(ivs, reshape(vars_, extents, order, dims))


@settings(max_examples=30, deadline=None)
@given(outer=st.integers(1, 5), n=st.integers(1, 6), swap=st.booleans())
def test_inverse_of_a_symbolic_row_major_numbering(outer, n, swap):
    size = T.size_var("n")
    y, w = T.var("y"), T.var("w")
    ivs = [IterVar(y, Range.from_extent(outer)), IterVar(w, Range.from_extent(size))]
    if swap:
        ivs.reverse()
    check_round_trip(ivs, [y * size + w], {size: n})


def test_a_fused_sum_split_by_digits():
    vi, vj, vk = T.var("vi"), T.var("vj"), T.var("vk")
    ivs = [IterVar(v, Range.from_extent(n)) for v, n in ((vi, 3), (vj, 4), (vk, 2))]
    f = (vi * 4 + vj) * 2 + vk
    check_round_trip(ivs, [f // 8, f % 8 // 2, f % 2])


def test_a_unit_variable_is_its_domain_minimum():
    u, v = T.var("u"), T.var("v")
    ivs = [IterVar(u, Range(T.const(5), T.const(1))), IterVar(v, Range.from_extent(8))]
    inv = inverse(ivs, [v // 4, v % 4])
    assert str(inv[u]) == "5" and str(inv[v]) == "x0 * 4 + x1"
    assert str(at(inv, [T.const(1), T.const(2)])[v]) == "6"


def test_refusals_name_the_reason():
    vi, vj, vk = T.var("vi"), T.var("vj"), T.var("vk")
    ivs = [IterVar(v, Range.from_extent(n)) for v, n in ((vi, 4), (vj, 4), (vk, 4))]
    with pytest.raises(NotInvertible, match="block variable vk does not appear in the "
                                            "indices"):
        inverse(ivs, [vi * 4 + vj, vi * 4 + vj])
    with pytest.raises(NotInvertible, match=r"vi \* vj is not quasi-affine"):
        inverse(ivs[:2], [vi * vj])
    n = T.size_var("n")
    y, w = T.var("y"), T.var("w")
    # w ranges over 2n values: y * n + w is not a row-major numbering
    bad = [IterVar(y, Range.from_extent(4)), IterVar(w, Range.from_extent(n * 2))]
    with pytest.raises(NotInvertible):
        inverse(bad, [y * n + w])
    assert linear_inverse((T.const(4), n * 2), [y, w], [y * n + w], [T.var("r")]) is None
