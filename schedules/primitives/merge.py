"""Loop merging: sibling loop nests of the same shape become one nest.

``merge(i, j)`` takes one loop from each of several adjacent loop nests of one scope, at
the same depth; the loops from the top of each nest down to the given loop are merged
depth by depth into new loops ``<name>_m`` (named after the first nest), whose body runs
the given loops' bodies one after the other, in program order:

    for i, k in T.grid(8, 16): C ...          for i_m in T.serial(8):
    for j, l in T.grid(8, 4): D ...               for k in T.serial(16): C ...
                                                  for l in T.serial(4): D ...

Legality.  The merged loops must start at 0, have equal extents depth by depth, and be
plain serial loops; above the given loop each nest must be a single chain (a loop whose
body is exactly the next loop).  Merging interleaves the nests, so iteration ``x`` of a
later nest now runs before iteration ``y > x`` of an earlier one: this is refused
unless different merged iterations of different nests touch different elements of
every buffer one of them writes (the test ``parallel`` uses for loop-carried
dependences, here only between blocks of different nests).  Within one iteration the
bodies keep their program order.

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((8,), name="A")
    >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> C = T.compute((8,), lambda i: A[i] + 1.0, name="C")
    >>> sch = S.Schedule(T.create_prim_func([A, B, C]))
    >>> sch.merge(sch.get_loops("B")[0], sch.get_loops("C")[0])
    LoopRV(i_m)
    >>> sch.get_loops("B") == sch.get_loops("C")
    True
"""

from __future__ import annotations

from cuvil_tir.expr import IntImm, Var, const
from cuvil_tir.stmt import For, seq
from cuvil_tir.structural import structural_equal
from cuvil_tir.visitor import substitute

from cuvil_tir.analysis import tree
from ..analysis import loop_path
from ..dependence import carried_dependence
from ..errors import LoopNestError, ScheduleArgumentError, schedule_error
from ..handles import LoopRV
from ..primitive import LOOP, primitive
from .loops import _check_plain

NAME = "merge"


def _nest(func, rv):
    """``(paths, loops)`` from the top of the loop's nest down to the loop."""
    path = loop_path(func, rv, NAME)
    above = tree.loops_above(func, path)
    return [p for p, _ in above] + [path], [n for _, n in above] + [tree.get(func, path)]


def _check_chain(func, loops):
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            raise schedule_error(LoopNestError, NAME, f"loop {outer.loop_var.name} has "
                                 f"more in its body than loop {inner.loop_var.name}: "
                                 "merge needs each loop above a given loop to have that "
                                 "chain as its only child", func, outer)
    for node in loops:
        _check_plain(node, NAME, func)
        if not (isinstance(node.min, IntImm) and node.min.value == 0):
            raise schedule_error(LoopNestError, NAME, f"loop {node.loop_var.name} starts "
                                 f"at {node.min}, expected 0", func, node)


def _adjacent_tops(func, nests):
    """The parent path and the sorted ``seq`` indices of the nests' top loops."""
    tops = [paths[0] for paths, _ in nests]
    parent = tops[0][:-1]
    if any(t[:-1] != parent or not isinstance(t[-1], tuple) for t in tops):
        raise schedule_error(LoopNestError, NAME, "the loops are not in sibling loop nests "
                             "of one sequence: merge takes one loop from each of several "
                             "adjacent nests of the same block", func,
                             tree.get(func, tops[-1]))
    idx = sorted(t[-1][1] for t in tops)
    if len(set(idx)) != len(idx):
        raise schedule_error(LoopNestError, NAME, "two of the loops are in the same loop "
                             "nest; give one loop per nest", func, tree.get(func, tops[0]))
    if idx != list(range(idx[0], idx[0] + len(idx))):
        raise schedule_error(LoopNestError, NAME, "the loop nests are not adjacent: "
                             "statements between them would run before the merged "
                             "iterations of the earlier nests; move them (compute_at) "
                             "or merge adjacent nests", func, tree.get(func, tops[0]))
    return parent, idx


@primitive(NAME, loops=LOOP, returns=LOOP)
def merge(func, *loops):
    """Merge one loop of each of several adjacent loop nests, and the loops above them,
    into one nest; returns the merged loop at the given loops' depth.

    The nests must have the same depth down to the given loops, loops starting at 0 of
    equal extents, single-chain loops above the given ones, and no dependence between
    the nests that merging would reorder (see :mod:`schedules.primitives.merge`).

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((4, 6), name="A")
        >>> B = T.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="B")
        >>> C = T.compute((4, 3), lambda i, j: A[i, j] + 1.0, name="C")
        >>> sch = S.Schedule(T.create_prim_func([A, B, C]))
        >>> sch.merge(sch.get_loops("B")[0], sch.get_loops("C")[0])
        LoopRV(i_m)
        >>> [l.var.name for l in sch.get_loops("C")]
        ['i_m', 'j']
    """
    if len(loops) < 2:
        raise schedule_error(ScheduleArgumentError, NAME, f"expected at least 2 loops, "
                             f"got {len(loops)}")
    nests = [_nest(func, rv) for rv in loops]
    depth = len(nests[0][1])
    scope = tree.enclosing_block(func, nests[0][0][-1])
    for paths, nodes in nests[1:]:
        if tree.enclosing_block(func, paths[-1]) != scope:
            raise schedule_error(LoopNestError, NAME, f"loops {nests[0][1][-1].loop_var.name}"
                                 f" and {nodes[-1].loop_var.name} are in different blocks' "
                                 "scopes; merge loops of one block", func, nodes[-1])
        if len(nodes) != depth:
            raise schedule_error(LoopNestError, NAME, f"loop {nodes[-1].loop_var.name} is "
                                 f"at depth {len(nodes)} of its nest, loop "
                                 f"{nests[0][1][-1].loop_var.name} at depth {depth}: "
                                 "merge loops at the same depth", func, nodes[-1])
    for paths, nodes in nests:
        _check_chain(func, nodes)
    for d in range(depth):
        first = nests[0][1][d]
        for _, nodes in nests[1:]:
            if not structural_equal(nodes[d].extent, first.extent):
                raise schedule_error(LoopNestError, NAME, f"loops {first.loop_var.name} "
                                     f"and {nodes[d].loop_var.name} have extents "
                                     f"{first.extent} and {nodes[d].extent}: merged loops "
                                     "need equal extents (split or pad one first)", func,
                                     nodes[d])
    parent, idx = _adjacent_tops(func, nests)
    nests.sort(key=lambda n: n[0][0][-1][1])            # program order
    new_vars = [Var(f"{n.loop_var.name}_m", n.loop_var.dtype) for n in nests[0][1]]
    bodies = [substitute(nodes[-1].body, {n.loop_var: v for n, v in zip(nodes, new_vars)})
              for _, nodes in nests]
    body = seq(*bodies)
    for v, n in reversed(list(zip(new_vars, nests[0][1]))):
        body = For(v, const(0, v.dtype), n.extent, "serial", body)
    owner = tree.get(func, parent)
    items = list(owner.seq)
    items[idx[0]:idx[-1] + 1] = [body]
    new_func = tree.replace(func, parent, seq(*items) if len(items) > 1 else items[0])
    _check_dependences(new_func, nests, new_vars)
    return new_func, LoopRV(new_vars[-1])


def _check_dependences(func, nests, new_vars):
    nest_of = {}
    for k, (_, nodes) in enumerate(nests):
        for br in tree.blocks_under(nodes[-1].body):
            nest_of[br.block.name] = k
    for v in new_vars:
        path = tree.find_loop(func, v, NAME)
        why = carried_dependence(func, path,
                                 lambda a, b: nest_of.get(a) != nest_of.get(b))
        if why is not None:
            raise schedule_error(LoopNestError, NAME, f"{why}; merging would run one nest's iteration before the "
                                 "other's earlier iterations finish", func,
                                 tree.get(func, path))

