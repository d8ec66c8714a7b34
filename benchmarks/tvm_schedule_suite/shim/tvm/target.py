"""``tvm.target``: only CPU targets are in the measurement."""

from ._gap import OutOfScope, module_getattr


class Target:
    """A CPU target; usable as ``with Target(...):`` (nothing to set in Cuvil)."""

    def __init__(self, spec, host=None):
        text = str(spec)
        if not text.startswith(("llvm", "c")):
            raise OutOfScope(f"target {spec!r}")
        if "+sve" in text or "+sme" in text:
            raise OutOfScope(f"scalable vectors (Arm SVE/SME): target {spec!r}")
        self.kind = text.split()[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


__getattr__ = module_getattr("tvm.target")
