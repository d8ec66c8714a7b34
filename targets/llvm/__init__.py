"""The ``llvm`` target: host CPU code through LLVM IR text and llvmlite's MCJIT.

Options: ``mcpu`` (``"native"``: the host's CPU and features), ``mattr`` (features,
``"+avx2,-fma"``), ``opt_level`` (0-3, the new pass manager's level), ``fast_math``
(default ``"contract"``: ``fmul`` + ``fadd`` may fuse into ``fma``, one rounding
instead of two, as every BLAS does; ``False`` for strict IEEE results; ``True`` for all
flags; or LLVM flags such as ``"contract,reassoc"`` -- ``reassoc`` is opt-in: it lets
LLVM reorder reductions, so sums change in the last bits and may vectorize).

Registered with :func:`targets.register_target`, the public path every backend uses.

Example::

    >>> import targets
    >>> targets.get_target_kind("llvm").options["opt_level"]
    3
"""

from __future__ import annotations

from cuvil_tir.errors import TargetError

from ..registry import register_target
from .codegen import codegen_llvm
from .engine import process_triple, resolve_cpu
from .runtime import LLVMRuntimeModule

_FM_FLAGS = ("nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc", "fast")


def fast_math_flags(value) -> str:
    """LLVM fast-math flags text of the ``fast_math`` option.

    Example::

        >>> fast_math_flags(True), fast_math_flags("contract,reassoc"), fast_math_flags(False)
        ('fast', 'contract reassoc', '')
    """
    if value is True:
        return "fast"
    if not value:
        return ""
    flags = [f for f in str(value).replace(" ", ",").split(",") if f]
    for f in flags:
        if f not in _FM_FLAGS:
            raise TargetError(f"llvm: unknown fast-math flag {f!r}; expected some of "
                              f"{', '.join(_FM_FLAGS)}")
    return " ".join(flags)


class LLVMTargetKind:
    """The host CPU target kind.

    Example::

        >>> LLVMTargetKind.name
        'llvm'
    """

    name = "llvm"
    passes = None   # the default lowering pipeline of cuvil_tir.transform
    options = {"mcpu": "native", "mattr": "", "opt_level": 3, "fast_math": "contract"}

    def codegen(self, func, target) -> str:
        """LLVM IR text of a lowered function for ``target``."""
        cpu, features = resolve_cpu(target)
        return codegen_llvm(func, func.name, cpu=cpu, features=features,
                            fast_math=fast_math_flags(target.options.get("fast_math")),
                            triple=process_triple())

    def runtime(self, source: str, target, signature) -> LLVMRuntimeModule:
        """Compile ``source``; the result's ``raw`` runs the entry."""
        return LLVMRuntimeModule(source, target, signature)


LLVM = register_target(LLVMTargetKind())
