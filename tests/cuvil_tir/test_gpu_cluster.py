"""Thread-block clusters in the GPU interpreter: blocks of a cluster run together,
``cluster_sync()`` orders them, ``dsmem_load`` reads a peer's shared memory, and the
race checker names the statements a missing cluster barrier leaves unordered."""

import numpy as np
import pytest

import cuvil_tir as T
from cuvil_tir.ops.cluster import cluster_shape

SM90 = T.Target("cuda", arch="sm_90")
SYNC = '                T.evaluate(T.call_intrin("int32", "cluster_sync"))\n'
ROTATE = '''
def rotate(A: T.Buffer((8, 32), "float32"), B: T.Buffer((8, 32), "float32")):
    for b in T.thread_binding(8, thread="blockIdx.x", annotations={"cluster": 4}):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.allocate((32,), "float32", scope="shared") as S:
                S[t] = A[b, t]
SYNC1                B[b, t] = T.dsmem_load(S[31 - t], (b + 1) % 4)
SYNC2'''


def rotate_text(first=True, last=True, extra=""):
    """The kernel's text, without the first or last cluster barrier, ``extra``
    statements at the end (also read by tests/targets/test_cuda_cluster.py)."""
    return ROTATE.replace("SYNC1", SYNC if first else "").replace("SYNC2", (SYNC if last
                                                                         else "") + extra)


def _rotate(first=True, last=True, extra=""):
    return T.lower(T.parse(rotate_text(first, last, extra)), SM90)


def _data():
    a = np.random.default_rng(0).standard_normal((8, 32)).astype("float32")
    return a, np.zeros_like(a)


def test_blocks_of_a_cluster_read_each_others_shared_memory():
    a, b = _data()
    T.interpret(_rotate(), a, b, check_races=True)
    # block r of each cluster of 4 reads block (r + 1) % 4's row, reversed
    want = np.stack([a[i // 4 * 4 + (i % 4 + 1) % 4, ::-1] for i in range(8)])
    np.testing.assert_array_equal(b, want)


def test_a_dsmem_read_without_a_cluster_barrier_is_a_race_naming_both_statements():
    a, b = _data()
    with pytest.raises(T.RaceError, match=r"writes it in `S\[t\] = A\[b \* 32 \+ t\]`"
                       r".*reads it through DSMEM in `B\[b \* 32 \+ t\] = "
                       r"T\.dsmem_load\(S\[31 - t\].*no cluster_sync\(\) between them") as e:
        T.interpret(_rotate(first=False), a, b, check_races=True)
    assert e.value.buffer == "S" and len(e.value.statements) == 2


def test_a_block_exiting_while_a_peer_reads_its_shared_memory_is_reported():
    a, b = _data()
    with pytest.raises(T.RaceError, match=r"no cluster_sync\(\) follows before the kernel "
                                          r"ends: block \(1, 0, 0\) may exit first"):
        T.interpret(_rotate(last=False), a, b, check_races=True)


def test_the_owner_overwriting_what_a_peer_read_in_the_same_phase_is_a_race():
    a, b = _data()
    late = "                S[t] = T.float32(0)\n"
    with pytest.raises(T.RaceError, match=r"reads it through DSMEM in `B.*writes it in "
                                          r"`S\[t\] = T.float32\(0\)`"):
        T.interpret(_rotate(last=False, extra=late + SYNC), a, b, check_races=True)


def test_without_race_checks_the_results_are_the_same():
    a, b = _data()
    T.interpret(_rotate(), a, b)
    want = np.stack([a[i // 4 * 4 + (i % 4 + 1) % 4, ::-1] for i in range(8)])
    np.testing.assert_array_equal(b, want)


def test_a_rank_outside_the_cluster_is_refused():
    text = ROTATE.replace("SYNC1", SYNC).replace("SYNC2", SYNC).replace("(b + 1) % 4", "b")
    a, b = _data()
    with pytest.raises(T.LoweringError, match=r"reads block rank 4 of a cluster of 4 "
                                              r"block\(s\).*a rank lies in 0..3"):
        T.interpret(T.lower(T.parse(text), SM90), a, b)


def test_the_cluster_annotation_round_trips_through_the_text_form():
    f = T.parse(ROTATE.replace("SYNC1", SYNC).replace("SYNC2", SYNC))
    assert T.structural_equal(T.parse(str(f)), f)
    assert "T.dsmem_load(S[31 - t], (b + 1) % 4)" in str(f)
    assert cluster_shape(f.body) == (4, 1, 1)


@pytest.mark.parametrize("ann, extent, msg", [
    ("16", 16, r"a cluster of 16 blocks \(16, 1, 1\); Cuvil launches portable clusters "
               r"of at most 8 blocks"),
    ("4", 6, r"has the extent 6, which is not a constant multiple of its cluster size 4"),
    ('"x"', 8, r"the cluster annotation is the number of blocks .* found 'x'"),
])
def test_a_bad_cluster_shape_is_refused(ann, extent, msg):
    text = ROTATE.replace("SYNC1", SYNC).replace("SYNC2", SYNC).replace(
        '8, thread="blockIdx.x", annotations={"cluster": 4}',
        f'{extent}, thread="blockIdx.x", annotations={{"cluster": {ann}}}')
    with pytest.raises(T.LoweringError, match=msg):
        cluster_shape(T.parse(text).body)


def test_a_cluster_annotation_on_a_thread_loop_is_refused():
    text = ROTATE.replace("SYNC1", SYNC).replace("SYNC2", SYNC).replace(
        'T.thread_binding(32, thread="threadIdx.x")',
        'T.thread_binding(32, thread="threadIdx.x", annotations={"cluster": 2})')
    with pytest.raises(T.LoweringError, match=r"bound to threadIdx.x has the annotation "
                                              r"cluster=2; a cluster groups blocks"):
        cluster_shape(T.parse(text).body)


def test_two_dimensional_clusters_number_blocks_by_rank():
    text = '''
def k(R: T.Buffer((4, 4), "int32")):
    for by in T.thread_binding(4, thread="blockIdx.y", annotations={"cluster": 2}):
        for bx in T.thread_binding(4, thread="blockIdx.x", annotations={"cluster": 2}):
            for t in T.thread_binding(1, thread="threadIdx.x"):
                with T.allocate((1,), "int32", scope="shared") as S:
                    S[0] = by * 4 + bx
                    T.evaluate(T.call_intrin("int32", "cluster_sync"))
                    R[by, bx] = T.dsmem_load(S[0], 3)
                    T.evaluate(T.call_intrin("int32", "cluster_sync"))
'''
    r = np.zeros((4, 4), "int32")
    T.interpret(T.lower(T.parse(text), SM90), r, check_races=True)
    # rank 3 of a 2x2 cluster is its block (1, 1): every block reads that one's id
    want = np.array([[(y // 2 * 2 + 1) * 4 + x // 2 * 2 + 1 for x in range(4)]
                     for y in range(4)])
    np.testing.assert_array_equal(r, want)


GLOBAL = '''
def handoff(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    with T.allocate((8,), "float32", scope="global") as G:
        for b in T.thread_binding(8, thread="blockIdx.x", annotations={"cluster": 2}):
            for t in T.thread_binding(1, thread="threadIdx.x"):
                G[b] = A[b] * T.float32(2)
SYNC                B[b] = G[b // 2 * 2 + (b + 1) % 2]
'''


def test_a_cluster_barrier_orders_global_memory_between_the_blocks_of_a_cluster():
    a = np.arange(8, dtype="float32")
    b = np.zeros_like(a)
    T.interpret(T.lower(T.parse(GLOBAL.replace("SYNC", SYNC)), SM90), a, b,
                check_races=True)
    np.testing.assert_array_equal(b, 2 * a[[1, 0, 3, 2, 5, 4, 7, 6]])
    with pytest.raises(T.RaceError, match=r"data race on global buffer G") as err:
        T.interpret(T.lower(T.parse(GLOBAL.replace("SYNC", "")), SM90), a, b,
                    check_races=True)
    assert sorted(err.value.statements) == ["B[b] = G[b // 2 * 2 + (b + 1) % 2]",
                                            "G[b] = A[b] * T.float32(2)"]


ARRIVE = '                T.evaluate(T.call_intrin("int32", "cluster_arrive"))\n'
WAIT = '                T.evaluate(T.call_intrin("int32", "cluster_wait"))\n'
LATE = "                A[b, t] = T.float32(0)\n"


def test_an_arrive_after_the_reads_and_a_wait_at_the_end_keep_the_peers_alive():
    a, b = _data()
    want = np.stack([a[i // 4 * 4 + (i % 4 + 1) % 4, ::-1] for i in range(8)])
    # work between the halves: the arrive ends the reads, the wait comes before exit
    T.interpret(_rotate(last=False, extra=ARRIVE + LATE + WAIT), a, b, check_races=True)
    np.testing.assert_array_equal(b, want)


def test_a_dsmem_read_after_the_arrive_is_not_covered_by_its_wait():
    text = ROTATE.replace("SYNC1", SYNC).replace(
        "SYNC2", "").replace("                B[b, t] = T.dsmem_load", ARRIVE +
                             "                B[b, t] = T.dsmem_load") + WAIT
    a, b = _data()
    with pytest.raises(T.RaceError, match=r"no cluster_sync\(\) follows before the kernel "
                                          r"ends.*or a cluster_arrive\(\) after it"):
        T.interpret(T.lower(T.parse(text), SM90), a, b, check_races=True)


@pytest.mark.parametrize("extra, msg", [
    (WAIT, r"cluster_wait\(\) with no cluster_arrive\(\) before it"),
    (ARRIVE + ARRIVE + WAIT, r"cluster_arrive after a cluster_arrive\(\) with no "
                             r"cluster_wait\(\) between them"),
    (ARRIVE + SYNC, r"cluster_sync after a cluster_arrive\(\)")])
def test_unmatched_arrives_and_waits_are_refused(extra, msg):
    a, b = _data()
    with pytest.raises(T.LoweringError, match=msg):
        T.interpret(_rotate(extra=extra), a, b)


def test_two_loops_of_one_axis_declaring_different_clusters_are_refused():
    text = '''
def k(A: T.Buffer((8,), "float32")):
    for b in T.thread_binding(8, thread="blockIdx.x", annotations={"cluster": 4}):
        for t in T.thread_binding(1, thread="threadIdx.x"):
            A[b] = T.float32(1)
    for b in T.thread_binding(8, thread="blockIdx.x", annotations={"cluster": 2}):
        for t in T.thread_binding(1, thread="threadIdx.x"):
            A[b] = A[b] + T.float32(1)
'''
    f = T.parse(text)
    # within one kernel (a loop bound to the block index inside another)
    one = text.replace('''            A[b] = T.float32(1)
    for b in T.thread_binding(8, thread="blockIdx.x", annotations={"cluster": 2}):
        for t in T.thread_binding(1, thread="threadIdx.x"):
            A[b] = A[b] + T.float32(1)''', '''            A[b] = T.float32(1)
        for c in T.thread_binding(8, thread="blockIdx.x", annotations={"cluster": 2}):
            for t in T.thread_binding(1, thread="threadIdx.x"):
                A[c] = A[c] + T.float32(1)''')
    with pytest.raises(T.LoweringError, match=r"loop b bound to blockIdx.x declares "
                                              r"clusters of 4 blocks along blockIdx.x, another "
                                              r"loop bound to it 2: one kernel has one cluster "
                                              r"shape"):
        cluster_shape(T.parse(one).body)
    # two kernels may differ
    assert [cluster_shape(k) for k in f.body.seq] == [(4, 1, 1), (2, 1, 1)]
