"""The tuning records database: one checksummed JSON object per line, append-only.

Each record is written whole by a single ``write`` on a file opened with ``O_APPEND``
(under an advisory ``flock``), and the file is ``fsync``-ed once per batch, so two
tuners appending at once lose nothing and a crash loses at most the batch in flight.
On reading, a torn (truncated) or corrupt line is skipped and counted in
:attr:`Database.skipped`, never fatal.  Records are keyed by the workload: the build
key of the unscheduled function for the target (``build_key`` of :mod:`cuvil_tir.target`, which embeds
``T.fingerprint`` and the resolved target), so records measured on another CPU are
never mixed in.

Example::

    >>> import os, tempfile
    >>> db = Database(os.path.join(tempfile.mkdtemp(), "t.jsonl"))
    >>> db.append([{"workload": "w", "cand": "c1", "seconds": 2.0},
    ...            {"workload": "w", "cand": "c2", "seconds": 1.0}])
    >>> [r["cand"] for r in db.records("w")], db.measured("w") == {"c1", "c2"}
    (['c1', 'c2'], True)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os

from cuvil_tir.errors import ArgumentError
from cuvil_tir.target import build_key

VERSION = 1


def _checksum(body: dict) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def encode_line(record: dict) -> bytes:
    """The line (with its checksum and newline) that stores ``record``.

    Example::

        >>> decode_line(encode_line({"a": 1}))
        {'a': 1}
    """
    body = dict(record)
    body.pop("sum", None)
    body["v"] = VERSION
    body["sum"] = _checksum(body)
    return (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


def decode_line(line):
    """The record of one stored line, or None when it is torn, garbage or tampered with.

    Example::

        >>> decode_line(b'{"a": 1, "v": 1, "sum": "0"}') is None
        True
    """
    try:
        body = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict) or body.get("v") != VERSION:
        return None
    stored = body.pop("sum", None)
    if stored != _checksum(body):
        return None
    body.pop("v")
    return body


def workload_key(func, target) -> str:
    """The key of ``func`` (unscheduled) on ``target``: ``cuvil_tir.target.build_key``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> workload_key(f, "llvm -mcpu=haswell") != workload_key(f, "llvm -mcpu=skylake-avx512")
        True
    """
    return build_key(func, target)


def ranked(records) -> list:
    """Correct records, one per candidate, best first: candidates measured again before
    a winner was declared come first, by their re-measurement; then the others, by
    their fastest measurement.

    Example::

        >>> [r["cand"] for r in ranked([{"cand": "a", "seconds": 1.0},
        ...                            {"cand": "b", "seconds": 2.0},
        ...                            {"cand": "b", "seconds": 3.0, "remeasured": True}])]
        ['b', 'a']
    """
    by_cand: dict = {}
    for r in records:
        if r.get("seconds") is None or r.get("error"):
            continue
        old = by_cand.get(r["cand"])
        newer = bool(r.get("remeasured")) - bool(old.get("remeasured")) if old else 1
        if newer > 0 or (newer == 0 and r["seconds"] < old["seconds"]):
            by_cand[r["cand"]] = r
    return sorted(by_cand.values(), key=lambda r: (not r.get("remeasured"), r["seconds"]))


class Database:
    """Tuning records in the JSON-lines file ``path`` (created on first append).

    Example::

        >>> import os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "t.jsonl")
        >>> Database(p).append([{"workload": "w", "cand": "a", "seconds": 1.0}])
        >>> with open(p, "ab") as fh:
        ...     _ = fh.write(b'{"torn')
        >>> db = Database(p); len(db.records("w")), db.skipped
        (1, [2])
    """

    def __init__(self, path):
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentError(f"Database: expected a file path, got {type(path).__name__}"
                                f" ({path!r}); pass e.g. Database('tune.jsonl')")
        self.path = os.fspath(path)
        self.skipped: list = []
        self._records: list = []
        self._offset = 0
        self._line = 0
        self.reload()

    def reload(self) -> None:
        """Read what other writers appended since the last read (torn tail kept for later).

        Example::

            >>> import os, tempfile
            >>> db = Database(os.path.join(tempfile.mkdtemp(), "t.jsonl")); db.reload()
            >>> db.records()
            []
        """
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return
        lines = data.split(b"\n")
        tail = lines.pop()  # after the last newline: complete only when it decodes
        for raw in lines:
            self._line += 1
            self._offset += len(raw) + 1
            self._take(raw)
        if tail:
            rec = decode_line(tail)
            self._line += 1
            self._offset += len(tail)
            if rec is None:
                self.skipped.append(self._line)
            else:
                self._records.append(rec)

    def _take(self, raw: bytes) -> None:
        if not raw.strip():
            return
        rec = decode_line(raw)
        if rec is None:
            self.skipped.append(self._line)
        else:
            self._records.append(rec)

    def append(self, records) -> None:
        """Append ``records`` (dicts of JSON values), each line in one write, then fsync.

        Example::

            >>> import os, tempfile
            >>> db = Database(os.path.join(tempfile.mkdtemp(), "t.jsonl"))
            >>> db.append([{"workload": "w", "cand": "x", "seconds": None}]); len(db.records())
            1
        """
        lines = [encode_line(r) for r in records]
        if not lines:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_size and not self._ends_with_newline(fd):
                os.write(fd, b"\n")  # a torn line from a killed writer stays alone
            for line in lines:
                os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.reload()

    @staticmethod
    def _ends_with_newline(fd) -> bool:
        size = os.fstat(fd).st_size
        return os.pread(fd, 1, size - 1) == b"\n"

    def records(self, workload=None) -> list:
        """The records read so far, all or of one workload key.

        Example::

            >>> import os, tempfile
            >>> Database(os.path.join(tempfile.mkdtemp(), "t.jsonl")).records("w")
            []
        """
        return [r for r in self._records if workload is None or r.get("workload") == workload]

    def measured(self, workload) -> set:
        """The candidate keys of ``workload`` already measured (any outcome).

        Example::

            >>> import os, tempfile
            >>> Database(os.path.join(tempfile.mkdtemp(), "t.jsonl")).measured("w")
            set()
        """
        return {r.get("cand") for r in self.records(workload)}

    def best(self, workload, k: int = 1) -> list:
        """The ``k`` fastest correct records of ``workload``, fastest first (a re-measured
        candidate counts by its re-measurement).

        Example::

            >>> import os, tempfile
            >>> db = Database(os.path.join(tempfile.mkdtemp(), "t.jsonl"))
            >>> db.append([{"workload": "w", "cand": "a", "seconds": 2.0},
            ...            {"workload": "w", "cand": "b", "seconds": 1.0}])
            >>> [r["cand"] for r in db.best("w", 2)]
            ['b', 'a']
        """
        return ranked(self.records(workload))[:k]

    def top_k(self, func, target="llvm", k: int = 5) -> list:
        """The ``k`` best records of ``func`` (unscheduled) on ``target``.

        Example::

            >>> import os, tempfile, cuvil_tir as T
            >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
            >>> Database(os.path.join(tempfile.mkdtemp(), "t.jsonl")).top_k(f, "llvm")
            []
        """
        self.reload()
        return self.best(workload_key(func, target), k)
