"""A minimal LLVM IR text builder: SSA names, basic blocks, declarations, metadata.

The code generator writes instructions as text through this class; it tracks the
current basic block (phi nodes need their predecessors' names), hoists stack
allocations into the entry block (so an ``alloca`` inside a loop does not grow the
stack each iteration), and collects the declarations and loop metadata the module
needs.

Example::

    >>> b = IRBuilder()
    >>> x = b.op("add i32 1, 2")
    >>> b.lines
    ['  %t0 = add i32 1, 2']
"""

from __future__ import annotations


class IRBuilder:
    """Accumulates the body of one function and the module-level pieces it needs.

    Example::

        >>> b = IRBuilder()
        >>> b.start(b.label("for.head"))
        >>> b.current
        'for.head0'
    """

    def __init__(self):
        self.lines: list[str] = []
        self.entry_lines: list[str] = []
        self.declarations: dict[str, str] = {}
        self.metadata: list[str] = []
        self.current = "entry"
        self._n = 0
        self._labels: dict[str, int] = {}

    def tmp(self) -> str:
        """A fresh SSA name."""
        name = f"%t{self._n}"
        self._n += 1
        return name

    def op(self, text: str) -> str:
        """Emit ``%tN = text`` and return ``%tN``."""
        name = self.tmp()
        self.lines.append(f"  {name} = {text}")
        return name

    def raw(self, text: str) -> None:
        """Emit an instruction that defines no value (store, br, call void)."""
        self.lines.append("  " + text)

    def entry_alloca(self, text: str) -> str:
        """An ``alloca`` placed in the entry block; returns its pointer."""
        name = self.tmp()
        self.entry_lines.append(f"  {name} = {text}")
        return name

    def label(self, prefix: str) -> str:
        """A fresh basic-block label (not yet started)."""
        k = self._labels.get(prefix, 0)
        self._labels[prefix] = k + 1
        return f"{prefix}{k}"

    def start(self, label: str) -> None:
        """Begin the basic block ``label``; later instructions go into it."""
        self.lines.append(f"{label}:")
        self.current = label

    def declare(self, name: str, text: str) -> None:
        """Record a module-level declaration (once per name)."""
        self.declarations.setdefault(name, text)

    def metadata_node(self, tag: str, body: str) -> str:
        """The module's metadata node ``body`` (made once, found again by ``tag``)."""
        for line in self.metadata:
            if line.endswith(f"; {tag}"):
                return line.split(" ", 1)[0]
        ref = f"!{len(self.metadata)}"
        self.metadata.append(f"{ref} = {body} ; {tag}")
        return ref

    def nontemporal_metadata(self) -> str:
        """The module's ``!{i32 1}`` node for ``!nontemporal`` stores (made once)."""
        return self.metadata_node("nontemporal", "!{i32 1}")

    def loop_metadata(self, *properties: str) -> str:
        """A distinct self-referencing ``!llvm.loop`` node holding ``properties``."""
        base = len(self.metadata)
        refs = []
        for i, prop in enumerate(properties):
            self.metadata.append(f"!{base + 1 + i} = !{{{prop}}}")
            refs.append(f"!{base + 1 + i}")
        self.metadata.insert(base, f"!{base} = distinct !{{!{base}"
                                   f"{''.join(', ' + r for r in refs)}}}")
        return f"!{base}"
