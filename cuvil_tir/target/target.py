"""``Target``: a target kind's name plus options.

``Target("llvm", mcpu="znver3")``, or the string form ``Target("llvm -mcpu=znver3
-opt-level=2 -fast-math")`` (dashes in option names become underscores; a bare flag
is ``True``).  Options are checked against the kind's declared ``options`` (type, range, choices;
see :mod:`cuvil_tir.target.options`): a typo, a wrong type or a value out of range is
a ``TargetError`` naming the option, what it expects and what was found.

Example::

    >>> t = Target("llvm -mcpu=native -opt-level=2")
    >>> t.kind, t.options["opt_level"]
    ('llvm', 2)
    >>> str(Target("llvm", opt_level=1))
    'llvm -opt-level=1'
"""

from __future__ import annotations

import shlex

from ..errors import TargetError
from .options import check_options
from .registry import get_target_kind


def _parse_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        return text


class Target:
    """A target: ``kind`` (a registered name) and ``options``.

    ``options`` holds every option of the kind, defaults filled in; ``str(target)``
    shows the ones that differ from the defaults.

    Example::

        >>> Target("llvm").options["opt_level"]
        3
        >>> Target(Target("llvm")) == Target("llvm")
        True
    """

    __slots__ = ("kind", "options", "_key")

    def __init__(self, kind, **options):
        if isinstance(kind, Target):
            options = {**kind.explicit_options(), **options}
            kind = kind.kind
        if not isinstance(kind, str):
            raise TargetError(f"Target: expected a target name such as 'llvm', found "
                              f"{kind!r}")
        try:
            parts = shlex.split(kind)
        except ValueError as err:       # an unclosed quote
            raise TargetError(f"Target: cannot read the target string {kind!r} ({err}); "
                              "expected e.g. 'llvm -mcpu=native'") from None
        if not parts:
            raise TargetError("Target: empty target string; expected e.g. 'llvm'")
        kind, parsed = parts[0], {}
        for p in parts[1:]:
            if not p.startswith("-"):
                raise TargetError(f"Target {kind!r}: expected options like -mcpu=native, "
                                  f"found {p!r}")
            key, eq, val = p.lstrip("-").partition("=")
            parsed[key.replace("-", "_")] = _parse_value(val) if eq else True
        parsed.update(options)
        self.kind = kind
        self.options = check_options(kind, get_target_kind(kind).options, parsed)
        self._key = (kind, tuple(sorted((k, repr(v)) for k, v in self.options.items())))

    def explicit_options(self) -> dict:
        """The options that differ from the kind's defaults."""
        declared = get_target_kind(self.kind).options
        return {k: v for k, v in self.options.items() if declared[k].default != v}

    @property
    def kind_obj(self):
        """The registered :class:`~cuvil_tir.target.TargetKind` of this target."""
        return get_target_kind(self.kind)

    def __getattr__(self, name):
        if name.startswith("_") or name in Target.__slots__:
            raise AttributeError(name)
        try:
            return self.options[name]
        except KeyError:
            raise AttributeError(f"Target {self.kind!r} has no option {name!r}") from None

    def __eq__(self, other):
        return isinstance(other, Target) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __str__(self):
        parts = [self.kind]
        for k, v in sorted(self.explicit_options().items()):
            flag = "-" + k.replace("_", "-")
            parts.append(flag if v is True else f"{flag}={v}")
        return " ".join(parts)

    def __repr__(self):
        return f"Target({str(self)!r})"


def as_target(target) -> Target:
    """``target`` as a :class:`Target` (accepts a Target or its string form).

    Example::

        >>> as_target("llvm").kind
        'llvm'
    """
    return target if isinstance(target, Target) else Target(target)
