"""``tvm.script``: the TVMScript entry points (``tir``, ``ir``, ``ir_module``, ``from_source``)."""

from __future__ import annotations

import sys

from cuvil_tir.errors import CuvilError
from cuvil_tir.parser import parse

from . import ir, tir
from .ir import ir_module


def from_source(text: str, **kwargs):
    """Parse TVMScript text (a function or a module)."""
    try:
        return parse(text, env={"T": tir, "I": ir, "tvm": sys.modules["tvm"]})
    except CuvilError as err:
        raise tir.ParseFailure(f"from_source did not parse: {err}") from None


__all__ = ["tir", "ir", "ir_module", "from_source"]
