"""``T.graph``: the dataflow of a function as Graphviz DOT (and SVG/PNG when ``dot``
is installed).

Blocks are boxes, buffers are ellipses (shape, dtype, scope); an edge goes from a
buffer to each block that reads it and from each block to the buffers it writes.
With ``profile`` (per-block seconds, e.g. ``mod.profile(*arrays)``) each block shows
its time and share, and is filled from white (cold) to red (hot), so the hot spot is
seen at a glance.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> dot = T.graph(T.create_prim_func([A, B]))
    >>> print(dot.splitlines()[0])
    digraph main {
    >>> '"buf:A" -> "blk:B"' in dot and '"blk:B" -> "buf:B"' in dot
    True
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ..errors import CuvilError
from ..function import PrimFunc
from ..visitor import Visitor


class _Blocks(Visitor):
    def __init__(self):
        self.blocks: list = []

    def visit_Block(self, blk):
        if blk.name != "root" or blk.reads or blk.writes:
            self.blocks.append(blk)
        self.generic_visit(blk)


def _shape(buf) -> str:
    return "(" + ", ".join(str(d) for d in buf.shape) + ("," if len(buf.shape) == 1 else "") + ")"


def _quote(text: str) -> str:
    # labels carry DOT's own "\n" line breaks, so only quotes are escaped
    return '"' + text.replace('"', '\\"') + '"'


def _heat(share: float) -> str:
    """White (0) to red (1) as a Graphviz colour."""
    share = min(max(share, 0.0), 1.0)
    gb = int(round(255 * (1.0 - share)))
    return f"#ff{gb:02x}{gb:02x}"


def _as_func(func_or_sch) -> PrimFunc:
    func = func_or_sch if isinstance(func_or_sch, PrimFunc) else getattr(func_or_sch, "func",
                                                                         None)
    if not isinstance(func, PrimFunc):
        raise CuvilError(f"graph: expected a PrimFunc or a Schedule (an object with .func), "
                         f"found {type(func_or_sch).__name__}")
    return func


def graph(func_or_sch, profile=None, path: str | None = None) -> str:
    """DOT text of the blocks and buffers of a function or schedule.

    ``profile``: ``{block name: seconds}`` (or an object with such a ``.blocks``
    mapping, as returned by ``mod.profile``) to colour blocks by their share of the
    time.  ``path`` ending in ``.svg`` or ``.png`` also renders the picture with
    Graphviz's ``dot`` (a :class:`~cuvil_tir.errors.CuvilError` says so when it is
    not installed); ``.dot`` writes the text.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] + 1.0, name="B")
        >>> dot = T.graph(T.create_prim_func([A, B]), profile={"B": 0.5})
        >>> 'fillcolor="#ff0000"' in dot and "100%" in dot
        True
    """
    func = _as_func(func_or_sch)
    times = dict(getattr(profile, "blocks", profile) or {})
    total = sum(times.values()) or 0.0
    walker = _Blocks()
    walker.visit(func.body)
    params = {id(b) for b in func.buffers}
    lines = [f"digraph {func.name} {{", "  rankdir=LR;",
             '  node [fontname="Helvetica", fontsize=10];']
    buffers: dict = {}

    def buf_node(buf) -> str:
        name = f"buf:{buf.name}"
        if id(buf) not in buffers:
            buffers[id(buf)] = name
            role = "param" if id(buf) in params else buf.scope
            label = f"{buf.name}\\n{buf.dtype}{_shape(buf)}\\n{role}"
            style = ', style="filled", fillcolor="#e8f0ff"' if id(buf) in params else ""
            lines.append(f"  {_quote(name)} [shape=ellipse, label={_quote(label)}{style}];")
        return name

    for blk in walker.blocks:
        label = blk.name
        attrs = ""
        if blk.name in times:
            share = times[blk.name] / total if total else 0.0
            label += f"\\n{times[blk.name] * 1e3:.3f} ms ({share:.0%})"
            attrs = f', style="filled", fillcolor="{_heat(share)}"'
        iters = " ".join(("S" if iv.kind == "spatial" else "R") for iv in blk.iter_vars)
        if iters:
            label += f"\\n[{iters}]"
        lines.append(f"  {_quote('blk:' + blk.name)} [shape=box, label={_quote(label)}{attrs}];")
        for region in blk.reads:
            lines.append(f"  {_quote(buf_node(region.buffer))} -> {_quote('blk:' + blk.name)};")
        for region in blk.writes:
            lines.append(f"  {_quote('blk:' + blk.name)} -> {_quote(buf_node(region.buffer))};")
    lines.append("}")
    dot = "\n".join(lines) + "\n"
    if path is not None:
        render(dot, path)
    return dot


def render(dot: str, path: str) -> str:
    """Write ``dot`` to ``path``: ``.dot`` as text, ``.svg``/``.png`` through Graphviz.

    Example::

        >>> import os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "g.dot")
        >>> render("digraph g {}\\n", p) == p
        True
    """
    ext = os.path.splitext(path)[1].lower()
    if ext in ("", ".dot", ".gv"):
        with open(path, "w") as f:
            f.write(dot)
        return path
    if ext not in (".svg", ".png", ".pdf"):
        raise CuvilError(f"graph: cannot render {path!r}: expected a .dot, .svg, .png or "
                         ".pdf file name")
    exe = shutil.which("dot")
    if exe is None:
        raise CuvilError(f"graph: rendering {path!r} needs Graphviz's 'dot' program, which "
                         "is not installed; install graphviz (e.g. apt-get install graphviz) "
                         "or write the DOT text to a .dot file")
    proc = subprocess.run([exe, "-T" + ext[1:], "-o", path], input=dot.encode(),
                          capture_output=True, timeout=60)
    if proc.returncode:
        raise CuvilError(f"graph: dot failed to render {path!r}: "
                         f"{proc.stderr.decode(errors='replace').strip()}")
    return path


__all__ = ["graph", "render"]
