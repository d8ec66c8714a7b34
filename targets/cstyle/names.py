"""C identifiers for IR names: unique, never a keyword or a name generated code calls.

Example::

    >>> c_identifier("exp", set()), c_identifier("i", {"i"}), c_identifier("A.shared", set())
    ('v_exp', 'i_1', 'A_shared')
"""

from __future__ import annotations

import re

from cuvil_tir import ops

_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum
extern float for goto if inline int long register restrict return short signed sizeof
static struct switch typedef union unsigned void volatile while bool true false main
_Bool _Complex _Imaginary""".split())
#: C library names generated code may call: never used for variables or buffers
_LIBRARY_NAMES = frozenset("""malloc free size_t NULL INFINITY NAN fmod fmodf floor floorf
fabs fabsf INT64_MIN INT64_C UINT64_C""".split())

def _is_libm(name: str) -> bool:
    for op in ops.list_ops():
        libm = ops.get_op(op).libm
        if libm is not None and name in (libm, libm + "f"):
            return True
    return False



def c_identifier(name: str, taken: set) -> str:
    """``name`` made a C identifier not in ``taken`` (the caller adds it).

    Keywords, the C library's names, libm functions of the op registry and the
    ``cvl_`` prefix (generated helpers) get a ``v_`` prefix; a clash a ``_<k>`` suffix.

    Example::

        >>> c_identifier("cvl_x", set()), c_identifier("3d", set())
        ('v_cvl_x', 'v_3d')
    """
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    if base[0].isdigit() or base in _C_KEYWORDS or base in _LIBRARY_NAMES \
            or base.startswith("cvl_") or _is_libm(base):
        base = "v_" + base
    out, k = base, 0
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    return out
