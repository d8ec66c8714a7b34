"""Build keys: what a compiled artifact depends on, as one stable hex digest.

``build_key(lowered, target)`` combines

* :func:`cuvil_tir.fingerprint` of the IR (renaming-invariant, stable across
  processes),
* the target's *resolved* description (:func:`describe_target`: for ``llvm`` the CPU
  name and features that ``mcpu="native"`` stands for on this machine, the triple,
  and the other options),
* the versions of the tools that decide the code (the kind's
  ``tool_versions(target)``: Cuvil's, plus LLVM's and llvmlite's for ``llvm``),

so two builds with the same key produce the same machine code, and a key never
matches across a change of machine, compiler or Cuvil release.  The compile cache and
the tuning database key on it.

A target kind's ``describe(target) -> dict`` (JSON-serialisable values) says what its
options resolve to; the base class's lists the kind name and all options.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.target import Target
    >>> A = T.placeholder((4,), name="A")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
    >>> k = build_key(f, "llvm -mcpu=haswell")
    >>> k == build_key(f, Target("llvm", mcpu="haswell")), len(k)
    (True, 64)
    >>> k == build_key(f, "llvm -mcpu=skylake-avx512")
    False
"""

from __future__ import annotations

import hashlib
import json

from ..errors import TargetError
from ..fingerprint import fingerprint
from .target import as_target

# bump when the key's content changes
_FORMAT = "cuvil-build-key-1"


def describe_target(target) -> dict:
    """The resolved description of ``target``: what its code depends on.

    The kind's ``describe(target)``, with its ``kind`` filled in.

    Example::

        >>> d = describe_target("llvm -mcpu=haswell")
        >>> d["kind"], d["cpu"]
        ('llvm', 'haswell')
    """
    target = as_target(target)
    desc = dict(target.kind_obj.describe(target))
    desc.setdefault("kind", target.kind)
    if target.options.get("bounds_check") is False:
        # off, run-time checks leave the code as it was: keys built before the
        # option existed stay valid (on, it is part of the key)
        desc.pop("bounds_check", None)
        if isinstance(desc.get("options"), dict):
            desc["options"] = {k: v for k, v in desc["options"].items()
                               if k != "bounds_check"}
    return desc


def tool_versions(target) -> dict:
    """Versions of the tools that decide the code for ``target``: its kind's
    ``tool_versions`` (Cuvil's; LLVM's and llvmlite's for ``llvm``).

    Example::

        >>> sorted(tool_versions("llvm"))
        ['cuvil', 'llvm', 'llvmlite']
    """
    target = as_target(target)
    return dict(target.kind_obj.tool_versions(target))


def build_key(lowered, target) -> str:
    """A hex SHA-256 over the fingerprint of ``lowered`` (a PrimFunc, an IRModule or a
    Schedule), :func:`describe_target` of ``target`` and :func:`tool_versions`.

    Equal for structurally equal IR built for the same resolved target with the same
    tools, in any process; different when any of them differs.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> build_key(f, "llvm -mcpu=haswell") != build_key(f, "llvm -mcpu=haswell -opt-level=2")
        True
    """
    target = as_target(target)
    content = {"format": _FORMAT, "ir": fingerprint(lowered),
               "target": describe_target(target), "tools": tool_versions(target)}
    try:
        text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError) as err:
        raise TargetError(f"build_key: the description of target {str(target)!r} is not "
                          f"JSON-serialisable ({err}); a kind's describe(target) must "
                          "return plain values (str, int, float, bool, lists, dicts)") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


__all__ = ["build_key", "describe_target", "tool_versions"]
