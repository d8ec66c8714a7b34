"""Target options, declared by each kind with their type, range or choices, and checked
when a :class:`~cuvil_tir.target.Target` is made.

A kind's ``options`` maps each option name to an :class:`Option` (or to a plain
default, whose type is then the default's type).  ``Target("llvm", opt_level=7)``
fails at once with a :class:`~cuvil_tir.errors.TargetError` naming the option, what
it accepts and what was given; nothing reaches a pass or a code generator unchecked.

Example::

    >>> level = Option(3, int, min=0, max=3, doc="optimisation level")
    >>> level.check("llvm", "opt_level", 2)
    2
    >>> level.check("llvm", "opt_level", 7)
    Traceback (most recent call last):
      ...
    cuvil_tir.errors.TargetError: [CVL-E106] Target 'llvm': option 'opt_level' expects an int from 0 to 3 (optimisation level), found 7; fix: give a value as above, e.g. opt_level=3 (the default), or leave it out
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from ..errors import TargetError

_NAMES = {bool: "a bool (True or False)", int: "an int", str: "a string", float: "a number",
          dict: "a dict"}


def _type_text(types) -> str:
    return " or ".join(_NAMES.get(t, t.__name__) for t in types)


@dataclass(frozen=True)
class Option:
    """One option of a target kind: its ``default``, the ``type`` (or tuple of types)
    a value must have, and optionally ``choices``, a ``min``/``max`` for numbers, a
    ``pattern`` (regular expression) for strings, ``none_ok`` (``None`` accepted),
    ``empty_ok`` (an empty or blank string accepted; by default only where the default
    is empty: ``-mcpu=`` names no CPU and must not pass as one) and ``check``: a
    function ``value -> None`` that raises ``TargetError`` for a value the other fields
    cannot describe (a list of fast-math flags).

    Example::

        >>> Option("sm_80", str, pattern=r"sm_\\d{2,3}a?").check("cuda", "arch", "sm_90")
        'sm_90'
        >>> Option(True, bool).check("c", "openmp", "yes")
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.TargetError: [CVL-E106] Target 'c': option 'openmp' expects a bool (True or False), found 'yes'; fix: give a value as above, e.g. openmp=True (the default), or leave it out
        >>> Option("native", str).check("llvm", "mcpu", "")
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.TargetError: [CVL-E106] Target 'llvm': option 'mcpu' expects a string, found an empty string (write -mcpu=VALUE); fix: give a value as above, e.g. mcpu='native' (the default), or leave it out
    """

    default: object
    type: type | tuple | None = None
    choices: tuple = ()
    min: float | None = None
    max: float | None = None
    pattern: str | None = None
    none_ok: bool = False
    empty_ok: bool | None = None
    check_value: object = None
    doc: str = ""

    @classmethod
    def of(cls, value) -> Option:
        """``value`` itself when it is an ``Option``, else an option whose default is
        ``value`` and whose type is the default's (any type when the default is None).

        Example::

            >>> Option.of(3).types, Option.of(None).none_ok
            ((<class 'int'>,), True)
        """
        if isinstance(value, Option):
            return value
        return cls(value, None if value is None else type(value), none_ok=value is None)

    @property
    def types(self) -> tuple:
        """The accepted types as a tuple (empty: any)."""
        if self.type is None:
            return ()
        return self.type if isinstance(self.type, tuple) else (self.type,)

    def expected(self) -> str:
        """What the option accepts, in words (for messages and ``docs``).

        Example::

            >>> Option(0, int, min=0).expected()
            'an int >= 0'
        """
        if self.choices:
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        else:
            text = _type_text(self.types) if self.types else "any value"
            if self.min is not None and self.max is not None:
                text += f" from {self.min} to {self.max}"
            elif self.min is not None:
                text += f" >= {self.min}"
            elif self.max is not None:
                text += f" <= {self.max}"
            if self.pattern:
                text += f" matching {self.pattern!r}"
        if self.none_ok and self.default is not None:
            text += " or None"
        return text + (f" ({self.doc})" if self.doc else "")

    def fix(self, name: str) -> str:
        """How to correct a wrong value, in words (the end of the error message).

        Example::

            >>> Option(3, int, min=0, max=3).fix("opt_level")
            'fix: give a value as above, e.g. opt_level=3 (the default), or leave it out'
            >>> Option(None, str, none_ok=True).fix("mcpu")
            'fix: give a value as above, or leave mcpu out'
        """
        example = self.default if self.default is not None else \
            (self.choices[0] if self.choices else None)
        if example is None:
            return f"fix: give a value as above, or leave {name} out"
        what = " (the default)" if example == self.default else ""
        return f"fix: give a value as above, e.g. {name}={example!r}{what}, or leave it out"

    def _type_ok(self, value) -> bool:
        types = self.types
        if not types:
            return True
        if isinstance(value, bool) and bool not in types:
            return False        # True is an int to Python, never to an int option
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            return True
        return isinstance(value, types)

    def _empty_ok(self) -> bool:
        if self.empty_ok is not None:
            return self.empty_ok
        return isinstance(self.default, str) and not self.default.strip()

    def check(self, kind: str, name: str, value):
        """``value`` when this option accepts it, else a ``TargetError`` naming the
        kind, the option, what it expects and what was found."""
        def fail(found=None):
            found = f"{value!r}" if found is None else found
            raise TargetError(f"Target {kind!r}: option {name!r} expects "
                              f"{self.expected()}, found {found}; {self.fix(name)}")
        if value is None and (self.none_ok or self.default is None):
            return value
        if value is True and str in self.types and bool not in self.types:
            fail("a flag without a value (write -" + name.replace("_", "-") + "=...)")
        if not self._type_ok(value):
            fail(f"{value!r} ({type(value).__name__})" if not isinstance(value, str)
                 else None)
        if isinstance(value, str) and not value.strip() and not self._empty_ok():
            fail(("an empty string" if not value else f"a blank string {value!r}") +
                 " (write -" + name.replace("_", "-") + "=VALUE)")
        if self.choices and value not in self.choices:
            fail()
        if self.min is not None and value < self.min or \
                self.max is not None and value > self.max:
            fail()
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            fail()
        if self.check_value is not None:
            self.check_value(value)
        return value


def check_options(kind: str, declared: dict, given: dict) -> dict:
    """Every option of a kind with the ``given`` ones checked and the defaults filled
    in; an unknown name is a ``TargetError`` listing the known ones.

    Example::

        >>> check_options("k", {"a": Option(1, int), "b": Option("x", str)}, {"a": 2})
        {'a': 2, 'b': 'x'}
        >>> check_options("k", {"a": Option(1, int)}, {"c": 2})
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.TargetError: [CVL-E106] Target 'k': unknown option 'c'; known options: a; fix: remove it
    """
    for k in given:
        if k not in declared:
            near = difflib.get_close_matches(k, list(declared), n=1)
            fix = f"did you mean {near[0]!r}?" if near else "remove it"
            raise TargetError(f"Target {kind!r}: unknown option {k!r}; known options: "
                              f"{', '.join(sorted(declared)) or '(none)'}; fix: {fix}")
    return {k: opt.check(kind, k, given[k]) if k in given else opt.default
            for k, opt in declared.items()}


__all__ = ["Option", "check_options"]
