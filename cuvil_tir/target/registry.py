"""The one registry of target kinds.

A backend registers its :class:`~cuvil_tir.target.kind.TargetKind` with one call,
:func:`register_target`, or ships it as a Python entry point of the group
``cuvil.targets`` (name: the kind's name; value: ``module:object``, a kind instance
or class).  The registry loads an entry point the first time its name is asked for,
so ``T.lower(f, "llvm")`` works after ``import cuvil_tir`` alone and an accelerator
package installed on its own is found without importing it; nothing is loaded before
it is needed (``import cuvil_tir`` loads no backend).

Example::

    >>> class Doc(type(get_target_kind("llvm"))):     # the llvm backend, renamed
    ...     name = "doc-kind"
    >>> _ = register_target(Doc())
    >>> "doc-kind" in list_targets(), get_target_kind("doc-kind").name
    (True, 'doc-kind')
    >>> unregister_target("doc-kind")
"""

from __future__ import annotations

import importlib.metadata
import threading

from ..errors import TargetError
from ..thread_axes import ThreadAxis, register_thread_axis
from .kind import TargetKind
from .options import Option

#: the entry-point group a backend package declares its kinds in
ENTRY_POINT_GROUP = "cuvil.targets"

_KINDS: dict[str, TargetKind] = {}
_LOCK = threading.RLock()
_ENTRY_POINTS: list = []        # [ {name: EntryPoint} ] once read


def _entry_points() -> dict:
    if not _ENTRY_POINTS:
        eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        _ENTRY_POINTS.append({ep.name: ep for ep in eps})
    return _ENTRY_POINTS[0]


def _check(kind) -> TargetKind:
    if isinstance(kind, type) and issubclass(kind, TargetKind):
        kind = kind()
    if not isinstance(kind, TargetKind):
        raise TargetError(f"register_target: expected a TargetKind (a subclass of "
                          f"cuvil_tir.target.TargetKind, see docs/backends.md), found "
                          f"{kind!r}")
    name = kind.name
    if not isinstance(name, str) or not name or name != name.strip() or " " in name:
        raise TargetError(f"register_target: a target kind needs a non-empty 'name' "
                          f"without spaces, found {name!r} on {type(kind).__name__}")
    if type(kind).codegen is TargetKind.codegen or type(kind).load is TargetKind.load:
        raise TargetError(f"register_target: target kind {name!r} does not define both "
                          "steps a kind must write: codegen(module, target) -> Program "
                          "and load(program, target) -> Module")
    if not isinstance(kind.options, dict):
        raise TargetError(f"register_target: 'options' of target kind {name!r} must be a "
                          f"dict of name -> Option, found {type(kind.options).__name__}")
    # plain defaults become options of the default's type, once, at registration
    kind.options = {k: Option.of(v) for k, v in kind.options.items()}
    for axis in kind.axes:
        if not isinstance(axis, ThreadAxis):
            raise TargetError(f"register_target: 'axes' of target kind {name!r} are "
                              f"ThreadAxis declarations (cuvil_tir.target.Axis), found "
                              f"{axis!r}")
    return kind


def register_target(kind, replace: bool = False):
    """Register a target kind (a ``TargetKind`` instance, or its class); returns it.
    A second kind of the same name is refused unless ``replace=True``.

    Example::

        >>> from cuvil_tir.target import TargetKind
        >>> register_target(object())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.TargetError: [CVL-E106] register_target: expected a TargetKind (a subclass of cuvil_tir.target.TargetKind, see docs/backends.md), found <object object at ...>
    """
    kind = _check(kind)
    with _LOCK:
        if kind.name in _KINDS and not replace:
            raise TargetError(f"register_target: a target named {kind.name!r} is already "
                              "registered; pass replace=True to override it")
        _KINDS[kind.name] = kind
    # the kind's own hardware indices (an NPU's cores) join the IR's vocabulary
    for axis in kind.axes:
        register_thread_axis(axis)
    return kind


def _load_entry_point(name: str) -> None:
    ep = _entry_points().get(name)
    if ep is None:
        return
    try:
        obj = ep.load()
    except Exception as err:  # noqa: BLE001 - any failure of a plug-in is reported
        raise TargetError(f"target {name!r}: its entry point {ep.value!r} (group "
                          f"{ENTRY_POINT_GROUP!r}) failed to load: "
                          f"{type(err).__name__}: {err}") from err
    with _LOCK:
        registered = _KINDS.get(name)
    if registered is None:      # a module may register its kind as it imports
        register_target(obj)


def get_target_kind(name: str) -> TargetKind:
    """The kind called ``name``: registered, or found among the installed entry points;
    else ``TargetError`` listing the known ones.

    Example::

        >>> get_target_kind("llvm").name
        'llvm'
    """
    if not isinstance(name, str):
        raise TargetError(f"expected a target name such as 'llvm', found {name!r}")
    with _LOCK:
        kind = _KINDS.get(name)
    if kind is None:
        _load_entry_point(name)
        with _LOCK:
            kind = _KINDS.get(name)
    if kind is None:
        raise TargetError(f"unknown target {name!r}; registered targets: "
                          f"{', '.join(list_targets()) or '(none)'}. Register a new one "
                          "with targets.register_target(kind)")
    return kind


def list_targets() -> list[str]:
    """Names of every kind, registered or installed as an entry point, sorted.

    Example::

        >>> {"llvm", "c", "cuda"} <= set(list_targets())
        True
    """
    with _LOCK:
        names = set(_KINDS)
    return sorted(names | set(_entry_points()))


def loaded_kinds() -> list:
    """The kinds registered so far (entry points not yet asked for are not loaded).

    Example::

        >>> all(isinstance(k, TargetKind) for k in loaded_kinds())
        True
    """
    with _LOCK:
        return list(_KINDS.values())


def declared_scopes(load: bool = False) -> list:
    """The scopes some kind has a memory for, sorted: the kinds registered so far and
    the host memories every kind has by default; ``load=True`` first loads every
    installed kind (what a check does before calling a scope unknown).

    Example::

        >>> {"global", "local"} <= set(declared_scopes())
        True
    """
    if load:
        for name in list_targets():
            get_target_kind(name)
    scopes = {m.scope for m in TargetKind.memories}
    for kind in loaded_kinds():
        scopes.update(m.scope for m in kind.memories)
    return sorted(scopes)


def unregister_target(name: str) -> None:
    """Remove a registered kind (tests and notebooks that re-register); an installed
    entry point of that name is found again on the next request.

    Example::

        >>> unregister_target("no-such-kind")
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.TargetError: [CVL-E106] unregister_target: no target named 'no-such-kind' is registered
    """
    with _LOCK:
        if name not in _KINDS:
            raise TargetError(f"unregister_target: no target named {name!r} is "
                              "registered")
        del _KINDS[name]


__all__ = ["ENTRY_POINT_GROUP", "declared_scopes", "get_target_kind", "list_targets",
           "loaded_kinds", "register_target", "unregister_target"]
