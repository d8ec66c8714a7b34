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
