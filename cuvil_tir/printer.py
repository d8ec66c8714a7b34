"""TEMPORARY generic printer; replaced by the real text-form printer."""
from .node import Node, field_names

def to_text(n) -> str:
    if isinstance(n, Node):
        if getattr(n, "by_identity", False) and hasattr(n, "name"):
            return n.name
        return type(n).__name__ + "(" + ", ".join(to_text(getattr(n, f)) for f in field_names(type(n))) + ")"
    if isinstance(n, tuple):
        return "(" + ", ".join(to_text(v) for v in n) + ")"
    return repr(n)
