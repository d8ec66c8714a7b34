"""Build keys: what a compiled artifact depends on, as one stable hex digest.

``build_key(lowered, target)`` combines

* :func:`cuvil_tir.fingerprint` of the IR (renaming-invariant, stable across
  processes),
* the target's *resolved* description (:func:`describe_target`: for ``llvm`` the CPU
  name and features that ``mcpu="native"`` stands for on this machine, the triple,
  and the other options),
* Cuvil's version and LLVM's (and llvmlite's) version,

so two builds with the same key produce the same machine code, and a key never
matches across a change of machine, compiler or Cuvil release.  The compile cache and
the tuning database key on it.

A target kind may define ``describe(target) -> dict`` (JSON-serialisable values) to say
what its options resolve to; without it the kind name and all options are used.

Example::

    >>> import cuvil_tir as T, targets
    >>> A = T.placeholder((4,), name="A")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
    >>> k = targets.build_key(f, "llvm -mcpu=haswell")
    >>> k == targets.build_key(f, targets.Target("llvm", mcpu="haswell")), len(k)
    (True, 64)
    >>> k == targets.build_key(f, "llvm -mcpu=skylake-avx512")
    False
"""

from __future__ import annotations

import hashlib
import json

import llvmlite
import llvmlite.binding as llvm

import cuvil_tir
from cuvil_tir.errors import TargetError
from cuvil_tir.fingerprint import fingerprint

from .target import as_target

# bump when the key's content changes
_FORMAT = "cuvil-build-key-1"


def describe_target(target) -> dict:
    """The resolved description of ``target``: what its code depends on.

    Calls the kind's ``describe(target)`` when it has one, else lists the kind and
    every option.

    Example::

        >>> import targets
        >>> d = targets.describe_target("llvm -mcpu=haswell")
        >>> d["kind"], d["cpu"]
        ('llvm', 'haswell')
    """
    target = as_target(target)
    describe = getattr(target.kind_obj, "describe", None)
    if describe is None:
        desc = {"kind": target.kind, "options": dict(target.options)}
    else:
        desc = dict(describe(target))
        desc.setdefault("kind", target.kind)
    if target.options.get("bounds_check") is False:
        # off, run-time checks leave the code as it was: keys built before the
        # option existed stay valid (on, it is part of the key)
        desc.pop("bounds_check", None)
        if isinstance(desc.get("options"), dict):
            desc["options"] = {k: v for k, v in desc["options"].items()
                               if k != "bounds_check"}
    return desc


def tool_versions() -> dict:
    """Versions that decide the generated code: Cuvil's, LLVM's and llvmlite's.

    Example::

        >>> sorted(tool_versions())
        ['cuvil', 'llvm', 'llvmlite']
    """
    return {"cuvil": cuvil_tir.__version__,
            "llvm": ".".join(str(v) for v in llvm.llvm_version_info),
            "llvmlite": llvmlite.__version__}


def build_key(lowered, target) -> str:
    """A hex SHA-256 over the fingerprint of ``lowered`` (a PrimFunc, an IRModule or a
    Schedule), :func:`describe_target` of ``target`` and :func:`tool_versions`.

    Equal for structurally equal IR built for the same resolved target with the same
    tools, in any process; different when any of them differs.

    Example::

        >>> import cuvil_tir as T, targets
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> targets.build_key(f, "llvm -mcpu=haswell") != targets.build_key(f, "llvm -mcpu=haswell -opt-level=2")
        True
    """
    target = as_target(target)
    content = {"format": _FORMAT, "ir": fingerprint(lowered),
               "target": describe_target(target), "tools": tool_versions()}
    try:
        text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError) as err:
        raise TargetError(f"build_key: the description of target {str(target)!r} is not "
                          f"JSON-serialisable ({err}); a kind's describe(target) must "
                          "return plain values (str, int, float, bool, lists, dicts)") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
