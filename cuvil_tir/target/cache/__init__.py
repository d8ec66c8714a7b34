"""The persistent compile cache: the build driver (``targets.build``) looks here before
lowering and compiling; an entry is a :class:`~cuvil_tir.target.program.Program`.

Where: ``CUVIL_CACHE_DIR``, else ``$XDG_CACHE_HOME/cuvil``, else ``~/.cache/cuvil``.
Off: ``CUVIL_CACHE=0``.  Bound: ``CUVIL_CACHE_MAX_BYTES`` (default 1 GiB), least
recently used entries evicted first.  A folder that is a file or cannot be created or
written, or a bound that is not a positive number, turns the cache off with one warning
saying why; :func:`info` (``cuvil cache info``) reports the state and the reason.  The
settings are read when a build asks for the
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
import tempfile
import warnings

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


_OFF_WORDS = ("0", "false", "off", "no")
_warned: set = set()


def _max_bytes_setting() -> tuple:
    """``(bytes, None)``, or ``(None, why)`` when ``CUVIL_CACHE_MAX_BYTES`` is bad."""
    text = os.environ.get("CUVIL_CACHE_MAX_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_BYTES, None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        return None, (f"CUVIL_CACHE_MAX_BYTES={text!r} is not a positive whole number of "
                      f"bytes; set it to one (e.g. {DEFAULT_MAX_BYTES} for 1 GiB) or "
                      "unset it for that default")
    return value, None


_usable: set = set()


def _folder_problem(folder: str):
    """Why ``folder`` cannot hold the cache (a file, cannot be created, cannot be
    written), or None.  The folder is created and a file written and removed in it
    once per process (permissions alone do not tell: root on a read-only file
    system)."""
    if folder in _usable:
        return None
    probe = os.path.abspath(folder)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        what = "is" if probe == os.path.abspath(folder) else f"is under {probe}, which is"
        return (f"the cache folder {folder} {what} a file, not a folder; set "
                "CUVIL_CACHE_DIR to a folder")
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".probe")
        os.close(fd)
        os.remove(tmp)
    except OSError as err:
        return (f"cannot create or write the cache folder {folder} ({err.strerror or err}); "
                "set CUVIL_CACHE_DIR to a writable folder")
    _usable.add(folder)
    return None


def state() -> tuple:
    """``(on, why)``: whether builds use the cache now, and why not.  Off: the user
    said so (``CUVIL_CACHE=0``), ``CUVIL_CACHE_MAX_BYTES`` is not a positive number, or
    the folder is a file or cannot be created or written.

    Example::

        >>> import os, tempfile
        >>> os.environ["CUVIL_CACHE_DIR"] = tempfile.mkstemp()[1]     # a file
        >>> on, why = state(); on, "is a file, not a folder" in why
        (False, True)
        >>> del os.environ["CUVIL_CACHE_DIR"]
    """
    switch = os.environ.get("CUVIL_CACHE", "1").strip()
    if switch.lower() in _OFF_WORDS:
        return False, f"CUVIL_CACHE={switch}"
    why = _max_bytes_setting()[1] or _folder_problem(directory())
    return why is None, why or ""


def enabled() -> bool:
    """Whether builds use the cache (:func:`state`).  Off for a reason other than
    ``CUVIL_CACHE=0`` warns once per reason: a cache that quietly does nothing would
    make every build slow with no sign why.

    Example::

        >>> isinstance(enabled(), bool)
        True
    """
    on, why = state()
    if not on and not why.startswith("CUVIL_CACHE=") and why not in _warned:
        _warned.add(why)
        warnings.warn(f"compile cache off: {why}", stacklevel=3)
    return on


def store() -> Store:
    """The :class:`Store` of the current settings (the default bound when
    ``CUVIL_CACHE_MAX_BYTES`` is bad: :func:`state` reports that).

    Example::

        >>> store().max_bytes > 0
        True
    """
    return Store(directory(), _max_bytes_setting()[0] or DEFAULT_MAX_BYTES)


def info() -> dict:
    """``{"directory", "enabled", "state", "why", "entries", "bytes", "max_bytes"}``:
    ``state`` is ``"on"`` or ``"off"``, ``why`` says what turned it off.

    Example::

        >>> sorted(info())
        ['bytes', 'directory', 'enabled', 'entries', 'max_bytes', 'state', 'why']
    """
    on, why = state()
    return {**store().info(), "enabled": on, "state": "on" if on else "off", "why": why}


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
           "state", "store"]
