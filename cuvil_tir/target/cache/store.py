"""A crash-safe, multi-process, size-bounded store of build artefacts on disk.

Each entry is one file ``<dir>/<key[:2]>/<key>.cvl`` holding a header line (magic, the
entry's own key, the SHA-256 of key and payload, the payload's length) and the payload: a
small JSON table of named byte blobs followed by the blobs.  No pickle: loading an entry
runs no code.

Why these rules (the bugs of other compilers' caches):

* **published atomically**: written to a private temporary file in the same folder,
  flushed and fsync'ed, then ``os.replace``'d onto its name, so a reader sees the whole
  entry or none of it -- never a half-written one, and never another writer's temp file
  (temp names start with ``.tmp-`` and never end in ``.cvl``);
* **verified on read**: a wrong magic, length or checksum (a torn disk write, a
  truncated copy, a stray edit) is a miss; the bad file is removed and rebuilt;
* **carries its key**: an intact entry found under another key's name (files swapped
  or copied by hand, a foreign cache folder, a bug in a writer) is a miss too: the key
  in its header, covered by the checksum, must be the one asked for -- otherwise one
  kernel would run another's machine code;
* **safe under many processes**: two processes that build the same key both publish
  complete, identical entries; the last rename wins and readers are never hurt;
* **bounded**: after each publish, when the entries exceed ``max_bytes`` the least
  recently used ones go first (a hit refreshes the file's mtime).

Example::

    >>> import tempfile
    >>> store = Store(tempfile.mkdtemp(), max_bytes=1 << 20)
    >>> store.put("ab" * 32, {"obj": b"\\x7fELF...", "meta": b"{}"})
    >>> store.get("ab" * 32)["obj"]
    b'\\x7fELF...'
    >>> store.get("cd" * 32) is None
    True
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time

#: version 2: the header carries the entry's key (version 1 entries are misses)
MAGIC = b"CUVIL-CACHE-2"
_KEY = re.compile(r"[0-9a-f]{16,128}")
#: temporary files older than this are a dead writer's leftovers and are removed
STALE_TEMP_SECONDS = 3600.0


def encode(blobs: dict) -> bytes:
    """``{name: bytes}`` as one payload (a JSON table of names and sizes, then the bytes).

    Example::

        >>> decode(encode({"a": b"xy", "b": b""}))
        {'a': b'xy', 'b': b''}
    """
    names = sorted(blobs)
    table = json.dumps([[n, len(blobs[n])] for n in names]).encode()
    return len(table).to_bytes(8, "little") + table + b"".join(blobs[n] for n in names)


def decode(payload: bytes) -> dict:
    """The blobs of an :func:`encode`'d payload; ``ValueError`` when malformed.

    Example::

        >>> decode(b"nonsense")
        Traceback (most recent call last):
        ...
        ValueError: cache payload: table of 7310308002159816558 bytes does not fit in 8
    """
    if len(payload) < 8:
        raise ValueError("cache payload: shorter than its header")
    n = int.from_bytes(payload[:8], "little")
    if 8 + n > len(payload):
        raise ValueError(f"cache payload: table of {n} bytes does not fit in {len(payload)}")
    table = json.loads(payload[8:8 + n])
    out, pos = {}, 8 + n
    for name, size in table:
        out[name] = payload[pos:pos + size]
        pos += size
    if pos != len(payload):
        raise ValueError("cache payload: blob sizes do not add up")
    return out


class Store:
    """Entries keyed by hex strings under ``directory``, at most ``max_bytes`` in all.

    Example::

        >>> import tempfile
        >>> s = Store(tempfile.mkdtemp())
        >>> s.put("00" * 32, {"x": b"1"}); s.info()["entries"]
        1
    """

    def __init__(self, directory, max_bytes: int = 1 << 30):
        self.directory = os.fspath(directory)
        self.max_bytes = int(max_bytes)

    def path(self, key: str) -> str:
        """The file an entry of ``key`` lives in."""
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(f"cache key: expected 16-128 lowercase hex digits, got {key!r}")
        return os.path.join(self.directory, key[:2], key + ".cvl")

    def get(self, key: str):
        """The blobs stored under ``key``, or ``None`` (absent, corrupt or truncated:
        a bad entry is removed so that the next build publishes a good one)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        blobs = _verified(data, key)
        if blobs is None:
            _remove(path)
            return None
        try:
            os.utime(path)          # least recently *used*: a hit counts as a use
        except OSError:
            pass
        return blobs

    def put(self, key: str, blobs: dict) -> None:
        """Publish ``blobs`` under ``key`` atomically, then evict down to the bound.

        A full disk or a read-only folder is not an error: the build still works,
        it is just not cached.
        """
        path = self.path(key)
        payload = encode(blobs)
        head = b"%s %s %s %d\n" % (MAGIC, key.encode(), _digest(key, payload),
                                   len(payload))
        folder = os.path.dirname(path)
        try:
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(head)
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError:
            _remove(tmp)
            return
        self.evict()

    def entries(self) -> list:
        """``(mtime, size, path)`` of every published entry, oldest first."""
        out = []
        try:
            subdirs = list(os.scandir(self.directory))
        except OSError:
            return out
        for sub in subdirs:
            if not sub.is_dir():
                continue
            try:
                files = list(os.scandir(sub.path))
            except OSError:
                continue
            for e in files:
                try:
                    st = e.stat()
                except OSError:
                    continue
                if e.name.endswith(".cvl"):
                    out.append((st.st_mtime, st.st_size, e.path))
                elif e.name.startswith(".tmp-") and \
                        time.time() - st.st_mtime > STALE_TEMP_SECONDS:
                    _remove(e.path)
        out.sort()
        return out

    def evict(self) -> int:
        """Remove least recently used entries until the total fits ``max_bytes``;
        returns how many were removed."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in entries:
            if total <= self.max_bytes:
                break
            _remove(path)
            total -= size
            removed += 1
        return removed

    def clear(self) -> int:
        """Remove every entry; returns how many there were."""
        entries = self.entries()
        for _, _, path in entries:
            _remove(path)
        return len(entries)

    def info(self) -> dict:
        """``{"directory", "entries", "bytes", "max_bytes"}``."""
        entries = self.entries()
        return {"directory": self.directory, "entries": len(entries),
                "bytes": sum(size for _, size, _ in entries), "max_bytes": self.max_bytes}


def _digest(key: str, payload: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\n" + payload).hexdigest().encode()


def _verified(data: bytes, key: str):
    """The blobs of an entry file's bytes when it is whole and is the entry of ``key``."""
    head, nl, payload = data.partition(b"\n")
    parts = head.split(b" ")
    if not nl or len(parts) != 4 or parts[0] != MAGIC or parts[1] != key.encode():
        return None
    try:
        size = int(parts[3])
    except ValueError:
        return None
    if size != len(payload) or _digest(key, payload) != parts[2]:
        return None
    try:
        return decode(payload)
    except (ValueError, TypeError):
        return None


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
