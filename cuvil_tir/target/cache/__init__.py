"""The persistent compile cache: the build driver (``targets.build``) looks here before
lowering and compiling; an entry is a :class:`~cuvil_tir.target.program.Program`.

Where: ``CUVIL_CACHE_DIR``, else ``$XDG_CACHE_HOME/cuvil``, else ``~/.cache/cuvil``.
Off: ``CUVIL_CACHE=0``.  Bound: ``CUVIL_CACHE_MAX_BYTES`` (default 1 GiB), least
recently used entries evicted first.  The settings are read when a build asks for the
cache, never inside passes.  Entries are published atomically and verified on read
(see :mod:`targets.cache.store`), so any number of processes may share one folder.

Example::

    >>> import os, tempfile
    >>> os.environ["CUVIL_CACHE_DIR"] = tempfile.mkdtemp()
    >>> info()["entries"]
    0
    >>> del os.environ["CUVIL_CACHE_DIR"]
"""

from __future__ import annotations

import os

from ...errors import TargetError
from .entries import cache_key, code_identity
from .store import Store

DEFAULT_MAX_BYTES = 1 << 30


def directory() -> str:
    """The cache folder the current environment selects.

    Example::

        >>> isinstance(directory(), str)
        True
    """
    d = os.environ.get("CUVIL_CACHE_DIR")
    if d:
        return os.path.expanduser(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cuvil")


def enabled() -> bool:
    """False when ``CUVIL_CACHE`` is ``0``/``false``/``off``/``no``.

    Example::

        >>> isinstance(enabled(), bool)
        True
    """
    return os.environ.get("CUVIL_CACHE", "1").strip().lower() not in ("0", "false", "off",
                                                                      "no")


def _max_bytes() -> int:
    text = os.environ.get("CUVIL_CACHE_MAX_BYTES", "")
    try:
        return int(text) if text else DEFAULT_MAX_BYTES
    except ValueError:
        raise TargetError(f"CUVIL_CACHE_MAX_BYTES: expected a number of bytes, found "
                          f"{text!r}") from None


def store() -> Store:
    """The :class:`Store` of the current settings.

    Example::

        >>> store().max_bytes > 0
        True
    """
    return Store(directory(), _max_bytes())


def info() -> dict:
    """``{"directory", "enabled", "entries", "bytes", "max_bytes"}``.

    Example::

        >>> sorted(info())
        ['bytes', 'directory', 'enabled', 'entries', 'max_bytes']
    """
    return {**store().info(), "enabled": enabled()}


def clear() -> int:
    """Remove every entry of the cache; returns how many were removed.

    Example::

        >>> import os, tempfile
        >>> os.environ["CUVIL_CACHE_DIR"] = tempfile.mkdtemp()
        >>> clear()
        0
        >>> del os.environ["CUVIL_CACHE_DIR"]
    """
    return store().clear()


__all__ = ["Store", "cache_key", "clear", "code_identity", "directory", "enabled", "info",
           "store"]
