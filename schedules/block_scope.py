"""The dependence graph of a scope: which child blocks must run before which.

A *scope* is a block (the root, or a block holding other blocks); its *children* are
the blocks directly inside it (not inside another block), in program order.  Two
children depend on each other when one runs first and they touch a common buffer, at
least one of them writing it (as declared by their ``reads``/``writes``):

- ``RAW`` (read after write): the later block reads what the earlier one writes, the
  producer/consumer relation ``compute_at`` and ``compute_inline`` follow;
- ``WAW`` (write after write): both write it (an ``init`` block and its update);
- ``WAR`` (write after read): the later block overwrites what the earlier one read;
  moving either across the other would change what the reader sees.

Dependences are per buffer, not per element: ``B[0:4]`` written and ``B[4:8]`` read
still depend (conservative, never optimistic).  A block does not depend on itself.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i] + 1.0, name="C")])
    >>> [str(d) for d in block_scope(f).deps]
    ['B -RAW-> C']
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import child_blocks
from cuvil_tir.function import PrimFunc

from .analysis import block_path
from .errors import ScheduleArgumentError, schedule_error
from .handles import BlockRV


class DepKind(enum.Enum):
    """The kind of a dependence between two blocks of a scope.

    Example::

        >>> DepKind.RAW.value, DepKind("WAR") is DepKind.WAR
        ('RAW', True)
    """

    RAW = "RAW"
    WAW = "WAW"
    WAR = "WAR"


@dataclass(frozen=True)
class Dependence:
    """``dst`` must run after ``src`` (handles of two children of one scope) because
    of the ``buffers`` (names) they share, as ``kind`` says.

    Example::

        >>> d = Dependence(BlockRV("B"), BlockRV("C"), DepKind.RAW, ("B",))
        >>> str(d), d.kind is DepKind.RAW
        ('B -RAW-> C', True)
    """

    src: BlockRV
    dst: BlockRV
    kind: DepKind
    buffers: tuple

    def __str__(self) -> str:
        return f"{self.src.name} -{self.kind.value}-> {self.dst.name}"


@dataclass(frozen=True)
class BlockScope:
    """The children of the scope ``block`` (in program order) and their dependences:
    by destination in program order; for one destination ``RAW``, ``WAW``, ``WAR``,
    each in the order of the buffers it accesses.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> scope = block_scope(matmul(4, 4, 4))
        >>> scope.children, [str(d) for d in scope.deps]
        ((BlockRV('C'),), [])
    """

    block: BlockRV
    children: tuple
    deps: tuple

    def deps_by_src(self, block) -> list:
        """The dependences whose source is ``block`` (a handle or a name).

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((4,), name="A")
            >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
            >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i], name="C")])
            >>> [str(d) for d in block_scope(f).deps_by_src("B")]
            ['B -RAW-> C']
        """
        name = self._child(block, "deps_by_src")
        return [d for d in self.deps if d.src.name == name]

    def deps_by_dst(self, block) -> list:
        """The dependences whose destination is ``block`` (a handle or a name).

        Example::

            >>> import cuvil_tir as T
            >>> A = T.placeholder((4,), name="A")
            >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
            >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i], name="C")])
            >>> [str(d) for d in block_scope(f).deps_by_dst("C")]
            ['B -RAW-> C']
        """
        name = self._child(block, "deps_by_dst")
        return [d for d in self.deps if d.dst.name == name]

    def _child(self, block, what: str) -> str:
        name = block.name if isinstance(block, BlockRV) else block
        if name not in {c.name for c in self.children}:
            raise schedule_error(ScheduleArgumentError, f"BlockScope.{what}",
                                 f"block {name!r} is not a child of scope "
                                 f"{self.block.name!r}; its children are "
                                 f"{[c.name for c in self.children]}. Take the scope of "
                                 "the block's parent (block_scope(func, parent))")
        return name


def func_of(func_or_sch, what: str) -> PrimFunc:
    """The PrimFunc of a PrimFunc or a Schedule (its current function).

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(2, 2, 2)
        >>> func_of(f, "block_scope") is f
        True
    """
    func = getattr(func_or_sch, "func", func_or_sch)
    if not isinstance(func, PrimFunc):
        raise schedule_error(ScheduleArgumentError, what,
                             f"expected a PrimFunc or a Schedule, found "
                             f"{type(func_or_sch).__name__}")
    return func


def block_of(func: PrimFunc, block, what: str) -> tuple:
    """The path of ``block`` (a BlockRV or a block name) in ``func``.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> block_of(matmul(2, 2, 2), "root", "block_scope")
        ()
    """
    return block_path(func, BlockRV(block) if isinstance(block, str) else block, what)


def scope_dependences(func: PrimFunc, scope_path: tuple) -> BlockScope:
    """:func:`block_scope` of the block at ``scope_path`` (a path, for the analyses
    that already hold one).

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> scope_dependences(matmul(2, 2, 2), ()).block
        BlockRV('root')
    """
    children = [br.block for _, br in child_blocks(func, scope_path)]
    readers: dict = {}
    writers: dict = {}
    deps: list = []
    for blk in children:
        reads = {id(r.buffer): r.buffer.name for r in blk.reads}
        writes = {id(w.buffer): w.buffer.name for w in blk.writes}
        found: dict = {}
        # the kinds as TensorIR orders them: what this block reads, then writes
        for kind, mine, earlier in ((DepKind.RAW, reads, writers),
                                    (DepKind.WAW, writes, writers),
                                    (DepKind.WAR, writes, readers)):
            for key, bname in mine.items():
                for src in earlier.get(key, []):
                    if src is not blk:
                        found.setdefault((kind, src.name), []).append(bname)
        for (kind, src), bufs in found.items():
            deps.append(Dependence(BlockRV(src), BlockRV(blk.name), kind,
                                   tuple(dict.fromkeys(bufs))))
        for key in reads:
            readers.setdefault(key, []).append(blk)
        for key in writes:
            writers.setdefault(key, []).append(blk)
    scope = tree.get(func, scope_path)
    return BlockScope(BlockRV(scope.block.name), tuple(BlockRV(b.name) for b in children),
                      tuple(deps))


def block_scope(func_or_sch, block="root") -> BlockScope:
    """The children of the scope ``block`` (a handle or a name; default the root) of
    a PrimFunc or a Schedule's current function, and their dependences.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> import schedules as S
        >>> sch = S.Schedule(matmul(4, 4, 4))
        >>> _ = sch.decompose_reduction("C", sch.get_loops("C")[2])
        >>> [str(d) for d in block_scope(sch).deps]
        ['C_init -RAW-> C_update', 'C_init -WAW-> C_update']
    """
    func = func_of(func_or_sch, "block_scope")
    return scope_dependences(func, block_of(func, block, "block_scope"))

def _related(func, path: tuple, end: str) -> list:
    """The ``BlockRealize`` of the scope's children at the other ``end`` ("src" or
    "dst") of a read-after-write dependence of the block at ``path``, in IR order."""
    if not path:
        return []
    scope_path = tree.enclosing_block(func, path)
    name = tree.get(func, path).block.name
    scope = scope_dependences(func, scope_path)
    deps = scope.deps_by_dst(name) if end == "src" else scope.deps_by_src(name)
    names = {getattr(d, end).name for d in deps if d.kind is DepKind.RAW}
    return [br for _, br in child_blocks(func, scope_path) if br.block.name in names]


def producers(func, path: tuple) -> list:
    """The earlier sibling blocks writing a buffer the block at ``path`` reads (the
    sources of its read-after-write dependences, :mod:`schedules.block_scope`), in IR
    order.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> producers(f, tree.find_block(f, "B"))
        []
    """
    return _related(func, path, "src")


def consumers(func, path: tuple) -> list:
    """The later sibling blocks reading a buffer the block at ``path`` writes (the
    destinations of its read-after-write dependences), in IR order.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> consumers(f, tree.find_block(f, "B"))
        []
    """
    return _related(func, path, "dst")


__all__ = ["DepKind", "Dependence", "BlockScope", "block_scope", "scope_dependences",
           "func_of", "block_of", "producers", "consumers"]
