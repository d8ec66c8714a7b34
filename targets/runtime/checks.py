"""Run-time checks (``T.assert_``, bounds checks) in native code: sites and reports.

A compiled function with ``AssertStmt`` checks owns a small *error slot*, an array of
``int64``: on a failed check the kernel claims the slot (``slot[0] = site + 1``, the
first failure wins, also across threads), stores the check's run-time values in
``slot[1:]`` and returns :data:`STATUS_CHECK_FAILED`.  The static part of each check
(its kind and message pattern) is written into the generated source as one comment
line per site (``cuvil.check <site> <json>``), so a module loaded from the compile
cache knows its messages without the IR.  :class:`CheckReport` turns the slot into
the ``T.RuntimeCheckError`` / ``T.BoundsCheckError`` raised by the module.

Example::

    >>> import cuvil_tir as T
    >>> i = T.var("i")
    >>> f = T.PrimFunc([], T.For(i, T.const(0), T.const(4), "serial",
    ...                 T.assert_(i < 3, "i = {}", i)))
    >>> [s.message for s in check_sites(f)]
    ['i = {}']
    >>> site_comments(f, "//")
    ['// cuvil.check 0 {"kind": "assert", "message": "i = {}", "values": 1}']
"""

from __future__ import annotations

import ctypes
import json
import re

from cuvil_tir.errors import TargetError, check_error
from cuvil_tir.visitor import Visitor

#: the status a kernel returns when a run-time check failed (see the module docstring)
STATUS_CHECK_FAILED = 2

_LINE = re.compile(r"cuvil\.check (\d+) (\{.*\})")


def check_sites(func) -> list:
    """The ``AssertStmt`` nodes of ``func`` in pre-order: a check's site number is its
    position here.

    Example::

        >>> import cuvil_tir as T
        >>> check_sites(T.PrimFunc([], T.Evaluate(T.const(0))))
        []
    """
    out: list = []
    seen: set = set()

    class _V(Visitor):
        def visit_AssertStmt(self, s):
            if id(s) not in seen:
                seen.add(id(s))
                out.append(s)
            self.generic_visit(s)

    funcs = getattr(func, "functions", None)
    for f in (funcs if funcs is not None else [func]):
        _V().visit(f.body)
    return out


def site_index(sites: list) -> dict:
    """``id(node) -> site number`` for :func:`check_sites`' list.

    Example::

        >>> site_index([])
        {}
    """
    return {id(s): k for k, s in enumerate(sites)}


def slot_size(sites: list) -> int:
    """Number of int64 words in the error slot: the claim word plus the most values
    any check reports.

    Example::

        >>> slot_size([])
        1
    """
    return 1 + max((len(s.values) for s in sites), default=0)


def site_comments(func, prefix: str, suffix: str = "") -> list:
    """One comment line per check site of ``func`` (``prefix`` starts a comment in the
    generated language, ``suffix`` ends it).

    Example::

        >>> import cuvil_tir as T
        >>> site_comments(T.PrimFunc([], T.Evaluate(T.const(0))), ";")
        []
    """
    lines = []
    for k, s in enumerate(check_sites(func)):
        text = json.dumps({"kind": s.kind, "message": s.message, "values": len(s.values)})
        text = text.replace("*/", "*\\/")    # a JSON escape: the C comment stays closed
        lines.append(f"{prefix} cuvil.check {k} {text}{suffix}")
    return lines


class CheckReport:
    """Reads a module's error slot after a failed check and builds the error.

    ``slot_address()`` returns the address of the slot (the kernel's
    ``<name>__cuvil_check_slot`` function).

    Example::

        >>> CheckReport("no checks here", lambda: 0).sites
        {}
    """

    def __init__(self, source: str, slot_address):
        self.sites = {}
        for m in _LINE.finditer(source):
            self.sites[int(m.group(1))] = json.loads(m.group(2))
        self._slot_address = slot_address

    def error(self, name: str, lang: str) -> TargetError:
        """The error of the failed check (the slot is cleared for the next call)."""
        n = 1 + max((s["values"] for s in self.sites.values()), default=0)
        slot = (ctypes.c_int64 * n).from_address(self._slot_address())
        site = slot[0] - 1
        info = self.sites.get(site)
        if info is None:
            slot[0] = 0
            return TargetError(f"{lang}: {name} stopped: a run-time check failed but its "
                               f"site ({site}) is unknown; outputs may be partly written")
        values = [slot[1 + k] for k in range(info["values"])]
        slot[0] = 0
        return check_error(info["kind"], info["message"].format(*values), values)


def check_report(source: str, slot_address) -> CheckReport | None:
    """The :class:`CheckReport` of a module whose generated ``source`` has checks, or
    ``None``; ``slot_address()`` returns the address of its error slot.

    Example::

        >>> check_report("no checks", lambda: 0) is None
        True
    """
    if "cuvil.check " not in source:
        return None
    return CheckReport(source, slot_address)
