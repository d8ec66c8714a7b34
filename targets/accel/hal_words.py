"""Vendor parameters packed as bit fields of one word (Gemmini's ``rs1``/``rs2``: a
``mvin`` takes the scratchpad address in bits 0-31, the columns in 32-47 and the rows
in 48-63 of one 64-bit register).

A :class:`HalWord` is one parameter of a :class:`~targets.accel.vendor_hal.HalCall`
made of fields, each a :class:`~targets.accel.vendor_hal.HalArg` (what it carries, its
unit, an address as an offset...) at a bit ``shift``, ``width`` bits wide (by default
its C type's).  The kernel passes ``((uint64_t)f0 << s0) | ((uint64_t)f1 << s1) | ...``
(one constant when every field is), each field checked to fit its width; the
simulator takes the fields apart and runs Cuvil's call.

Example::

    >>> from targets.accel.vendor_hal import HalArg
    >>> w = HalWord("rs2", "uint64_t", ((HalArg("rows", "rows", "uint16_t"), 48),
    ...                                 (HalArg("cols", "row_bytes", "uint16_t"), 32)))
    >>> [(a.name, s, n) for a, s, n in w.fields]
    [('rows', 48, 16), ('cols', 32, 16)]
    >>> HalWord("rs2", "uint32_t", ((HalArg("rows", "rows", "uint16_t"), 24),))
    Traceback (most recent call last):
      ...
    targets.accel.errors.DescriptionError: [CVL-E170] HalWord 'rs2': field 'rows' (bits 24-39) does not fit a uint32_t (32 bits) or overlaps another field; give each field its own bits of the word
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import DescriptionError

#: the width of each integer C type
BITS = {"int8_t": 8, "uint8_t": 8, "int16_t": 16, "uint16_t": 16, "int32_t": 32,
        "uint32_t": 32, "int64_t": 64, "uint64_t": 64}


@dataclass(frozen=True)
class HalWord:
    """One parameter of C type ``ctype`` (an unsigned integer) packing ``fields``:
    ``(HalArg, shift)`` or ``(HalArg, shift, width)`` (module doc)."""

    name: str
    ctype: str
    fields: tuple

    def __post_init__(self):
        at = f"HalWord {self.name!r}"
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z_]\w*", self.name):
            raise DescriptionError(f"HalWord: name must be a C identifier, found "
                                   f"{self.name!r}")
        if self.ctype not in BITS or not self.ctype.startswith("u"):
            raise DescriptionError(f"{at}: ctype must be an unsigned integer C type "
                                   f"({sorted(k for k in BITS if k.startswith('u'))}), found "
                                   f"{self.ctype!r}")
        out, used = [], 0
        for f in tuple(self.fields):
            if not isinstance(f, tuple) or len(f) not in (2, 3) or \
                    type(f[0]).__name__ != "HalArg":
                raise DescriptionError(f"{at}: fields takes (HalArg, shift) or (HalArg, "
                                       f"shift, width) entries, found {f!r}")
            a, shift = f[0], f[1]
            width = f[2] if len(f) == 3 else BITS.get(a.ctype)
            if a.ctype not in BITS or a.symbols or not all(
                    isinstance(x, int) and not isinstance(x, bool) for x in (shift, width)):
                raise DescriptionError(f"{at}: field {a.name!r} must be a number of an "
                                       f"integer C type without symbols, at an int shift "
                                       f"and width")
            mask = ((1 << width) - 1) << shift if width > 0 and shift >= 0 else -1
            if mask < 0 or shift + width > BITS[self.ctype] or used & mask:
                raise DescriptionError(
                    f"{at}: field {a.name!r} (bits {shift}-{shift + width - 1}) does not fit "
                    f"a {self.ctype} ({BITS[self.ctype]} bits) or overlaps another field; "
                    "give each field its own bits of the word")
            used |= mask
            out.append((a, shift, width))
        if not out:
            raise DescriptionError(f"{at}: it needs at least one field")
        object.__setattr__(self, "fields", tuple(out))

    def describe(self) -> tuple:
        """The word as plain data (the compile cache's key)."""
        return (self.name, self.ctype, [(a.name, a.carries, a.ctype, a.unit, a.address,
                                         a.minus, s, n) for a, s, n in self.fields])

    def pack(self, texts) -> str:
        """The C of the word from each field's C value: the constant fields as one
        literal, each other field shifted into place (masked when it may carry sign
        bits or is narrower than its C type)."""
        const, parts = 0, []
        for t, (a, s, n) in zip(texts, self.fields):
            if re.fullmatch(r"-?\d+", t):
                const |= (int(t) & ((1 << n) - 1)) << s
                continue
            v = f"({self.ctype})({t})"
            if not a.ctype.startswith("u") or n < BITS[a.ctype]:
                v = f"({v} & {hex((1 << n) - 1)}u)"
            parts.append(f"({v} << {s})" if s else v)
        if const or not parts:
            parts.append(hex(const) + ("ull" if self.ctype == "uint64_t" else "u"))
        return " | ".join(parts)

    def unpack(self, ref: str) -> list:
        """The C of each field's value from the word's C value ``ref``."""
        return [f"(({a.ctype})(({ref} >> {s}) & {hex((1 << n) - 1)}ull))"
                for a, s, n in self.fields]


def flat_args(call) -> list:
    """The :class:`HalArg` parameters of ``call``, each field of a word in place."""
    return [a for x in call.args
            for a in ([f[0] for f in x.fields] if isinstance(x, HalWord) else [x])]


__all__ = ["BITS", "HalWord", "flat_args"]
