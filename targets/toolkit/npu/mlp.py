"""Two int8 layers chained on an accelerator, the hidden activations kept on chip:
``O = requant(relu(A @ W1)) @ W2``.  The first product accumulates in the accumulator
memory, an on-chip move with activation (the device's ``Move`` from the accumulator to
the input memory) turns it into the second product's int8 input, and only ``O``
goes back to host memory.

Example::

    >>> f = mlp(32, 32, 48, 32, lambda x: T.cast(x, "int8"))
    >>> [p.name for p in f.params]
    ['A', 'W1', 'W2', 'O']
"""

import cuvil_tir as T
import schedules as S


def mlp(n, d, h, o, activation):
    """The workload of the module doc; ``activation`` maps the int32 first product to
    int8 (for a device whose move applies it, the same function)."""
    A = T.placeholder((n, d), "int8", name="A")
    W1 = T.placeholder((d, h), "int8", name="W1")
    W2 = T.placeholder((h, o), "int8", name="W2")
    k = T.reduce_axis((0, d), name="k")
    r = T.reduce_axis((0, h), name="r")
    C1 = T.compute((n, h), lambda i, j: T.sum(T.cast(A[i, k], "int32") *
                                              T.cast(W1[k, j], "int32"), axis=k), name="C1")
    H = T.compute((n, h), lambda i, j: activation(C1[i, j]), name="H")
    O = T.compute((n, o), lambda i, j: T.sum(T.cast(H[i, r], "int32") *
                                             T.cast(W2[r, j], "int32"), axis=r), name="O")
    return T.create_prim_func([A, W1, W2, O])


def schedule_mlp(func, gemm, inp, acc, t=16):
    """Stage A, W1, W2 into ``inp``, keep the first product in ``acc`` and the hidden
    layer in ``inp`` (``set_scope``: the copy between them is the on-chip move),
    write O through ``acc``, and tensorize both products with ``gemm`` in ``t``-tiles
    (the accumulators zeroed by the DMA)."""
    sch = S.Schedule(func)
    c1, c2 = sch.get_block("C1"), sch.get_block("O")
    sch.cache_read(c1, 0, inp)
    sch.cache_read(c1, 1, inp)
    sch.set_scope(c1, 0, acc)
    sch.set_scope(sch.get_block("H"), 0, inp)
    sch.cache_read(c2, 1, inp)
    sch.cache_write(c2, 0, acc)
    for blk in (c1, c2):
        i, j, k = sch.get_loops(blk)
        io, ii = sch.split(i, [None, t])
        jo, ji = sch.split(j, [None, t])
        ko, ki = sch.split(k, [None, t])
        sch.reorder(io, jo, ko, ii, ji, ki)
        sch.decompose_reduction(blk, ko)
        sch.tensorize(ii, gemm)
    return sch
