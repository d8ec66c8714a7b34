"""Schedule methods of the block primitives (compute location, inlining, caching,
storage, reduction, layout, tensorization).

Each method documents its primitive and calls ``self._apply(name, ...)``; the
primitive itself lives in a module of :mod:`schedules.primitives`.  Keyword options
(``preserve_unit_loops=...`` and the like) are forwarded to the primitive.

Example::

    >>> import schedules as S
    >>> S.Schedule.compute_at.__qualname__
    'BlockMethods.compute_at'
"""

from __future__ import annotations


class BlockMethods:
    """Mixin of :class:`schedules.Schedule` with the block primitives.

    Example::

        >>> from schedules import Schedule
        >>> issubclass(Schedule, BlockMethods)
        True
    """

    def compute_at(self, block, loop, **options) -> None:
        """Move producer ``block`` under ``loop`` of its consumer, computing only the
        region the consumer needs there.

        Before/after ``compute_at(B, i)``::

            for i in T.serial(8): B[i] = ...      for i in T.serial(8):
            for i in T.serial(8): C[i] = B[i]         B[i] = ...
                                                      C[i] = B[i]
        """
        return self._apply("compute_at", block, loop, **options)

    def reverse_compute_at(self, block, loop, **options) -> None:
        """Move consumer ``block`` under ``loop`` of its producer (see compute_at).

        Before/after ``reverse_compute_at(C, i)``: the same picture as compute_at, the
        consumer moving up into the producer's loop.
        """
        return self._apply("reverse_compute_at", block, loop, **options)

    def compute_inline(self, block) -> None:
        """Inline a spatial ``block`` into its consumers and remove it.

        Before/after::

            B[i] = A[i] * 2.0                 C[i] = A[i] * 2.0 + 1.0
            C[i] = B[i] + 1.0
        """
        return self._apply("compute_inline", block)

    def reverse_compute_inline(self, block) -> None:
        """Inline a consumer ``block`` into its single producer and remove it.

        Before/after::

            B[i] = A[i] * 2.0                 C[i] = A[i] * 2.0 + 1.0
            C[i] = B[i] + 1.0
        """
        return self._apply("reverse_compute_inline", block)

    def cache_read(self, block, read_buffer_index: int, scope: str, **options):
        """Copy ``block``'s ``read_buffer_index``-th read buffer into a new ``scope``
        buffer before it; returns the new copy block.

        Before/after ``cache_read(C, 0, "shared")``::

                                              A_shared[i] = A[i]
            C[i] = A[i] + 1.0                 C[i] = A_shared[i] + 1.0
        """
        return self._apply("cache_read", block, read_buffer_index, scope, **options)

    def cache_write(self, block, write_buffer_index: int, scope: str, **options):
        """Make ``block`` write a new ``scope`` buffer, copied to the original after;
        returns the new copy block.

        Before/after ``cache_write(C, 0, "local")``::

            C[i] = A[i] + 1.0                 C_local[i] = A[i] + 1.0
                                              C[i] = C_local[i]
        """
        return self._apply("cache_write", block, write_buffer_index, scope, **options)

    def set_scope(self, block, buffer_index: int, scope: str) -> None:
        """Change the storage scope of ``block``'s ``buffer_index``-th written buffer.

        Before/after ``set_scope(B, 0, "shared")``::

            B = T.alloc_buffer((8,))          B = T.alloc_buffer((8,), scope="shared")
        """
        return self._apply("set_scope", block, buffer_index, scope)

    def storage_align(self, block, buffer_index: int, axis: int, factor: int,
                      offset: int) -> None:
        """Pad dimension ``axis`` of a written buffer so its stride is
        ``k * factor + offset`` (avoids shared-memory bank conflicts).

        Before/after ``storage_align(B, 0, 0, 32, 1)`` on a (16, 32) buffer::

            B = T.alloc_buffer((16, 32))      B = T.alloc_buffer((16, 32), strides=(33, 1))
        """
        return self._apply("storage_align", block, buffer_index, axis, factor, offset)

    def decompose_reduction(self, block, loop):
        """Move the ``init`` of reduction ``block`` into its own block placed before
        ``loop``; returns the init block.

        Before/after ``decompose_reduction(C, k)``::

            for k in T.serial(8):             C_init: C[i] = 0.0
                with T.init(): C[i] = 0.0     for k in T.serial(8):
                C[i] = C[i] + A[i, k]             C[i] = C[i] + A[i, k]
        """
        return self._apply("decompose_reduction", block, loop)

    def rfactor(self, loop, factor_axis: int = 0):
        """Factor the reduction over ``loop`` into a new buffer of partial results
        (dimension ``factor_axis``); returns the rfactor block.

        Before/after ``rfactor(ki, 0)`` with ``k = ko * 4 + ki``::

            C[i] += A[i, ko*4 + ki]           C_rf[ki, i] += A[i, ko*4 + ki]
                                              C[i] += C_rf[ki, i]
        """
        return self._apply("rfactor", loop, factor_axis)

    def blockize(self, loop):
        """Wrap the subtree at ``loop`` into a new outer block; returns it.

        Before/after ``blockize(i_1)``::

            for i_0, i_1 in T.grid(2, 4):     for i_0 in T.serial(2):
                with T.block("B"): ...            with T.block("B_o"):
                                                      for i_1 in T.serial(4):
                                                          with T.block("B"): ...
        """
        return self._apply("blockize", loop)

    def pad_einsum(self, block, padding) -> None:
        """Round an einsum block's iteration domain up to multiples of ``padding`` (one
        int per iter var); its staged inputs are zero-filled past their size and its
        staged output grows (see :mod:`schedules.primitives.pad`).

        Before/after ``pad_einsum(C, [16, 16, 16])`` on a 100x70x50 GEMM::

            A_s[i, k] = A[i, k]                 A_s[i, k] = if_then_else(i < 100 and
            C_s[i, j] += A_s[i, k] * B_s[k, j]       k < 50, A[i, k], 0)    (112x64)
            (100x70x50)                         C_s[i, j] += ...        (112x80x64)
        """
        return self._apply("pad_einsum", block, padding)

    def tensorize(self, loop_or_block, intrin_name: str) -> None:
        """Replace the computation at ``loop_or_block`` by the registered tensor
        intrinsic ``intrin_name`` (see ``S.TensorIntrin.register``), after checking it
        matches the intrinsic's description.

        Before/after ``tensorize(i_1, "dot_4")``::

            for i_1 in T.serial(4):           T.call_extern("dot_4", ...)
                C[...] += A[...] * B[...]
        """
        return self._apply("tensorize", loop_or_block, intrin_name)

    def transform_layout(self, block, buffer_index: int, index_map,
                         buffer_index_type: str = "write") -> None:
        """Re-lay out ``block``'s buffer through ``index_map`` (a lambda over its
        indices returning the new indices); every access is rewritten.

        Before/after ``transform_layout(B, 0, lambda i, j: (j, i))``::

            B = T.alloc_buffer((4, 8))        B = T.alloc_buffer((8, 4))
            B[i, j] = ...                     B[j, i] = ...
        """
        return self._apply("transform_layout", block, buffer_index, index_map,
                           buffer_index_type=buffer_index_type)
