"""``tvm.runtime``, ``tvm.compile`` and devices: CPU builds through ``targets``."""

from __future__ import annotations

import numpy as np

from ._gap import OutOfScope, module_getattr


class Device:
    def __init__(self, kind: str, index: int = 0):
        if kind not in ("cpu", "llvm"):
            raise OutOfScope(f"device {kind!r}")
        self.kind, self.index = kind, index


def device(kind="cpu", index=0) -> Device:
    return Device(kind, index)


def cpu(index=0) -> Device:
    return Device("cpu", index)


class Tensor:
    """``tvm.runtime.tensor(array)``: a numpy array the compiled function writes into."""

    def __init__(self, array, dev=None):
        if dev is not None and not isinstance(dev, Device):
            raise OutOfScope(f"device {dev!r}")
        self._array = np.array(array)

    def numpy(self):
        return self._array

    @property
    def shape(self):
        return self._array.shape

    @property
    def dtype(self):
        return str(self._array.dtype)


def tensor(array, device=None) -> Tensor:
    return Tensor(array, device)


class _Built:
    def __init__(self, mod):
        self._mod = mod

    def __call__(self, *args):
        self._mod(*(a._array if isinstance(a, Tensor) else a for a in args))

    def __getitem__(self, name):
        return self


def compile(mod, target="llvm", **kwargs):
    """``tvm.compile`` for CPU targets: Cuvil's llvm backend."""
    import targets

    from ._compare import as_func
    kind = target if isinstance(target, str) else getattr(target, "kind", "llvm")
    if str(kind).split()[0] not in ("llvm", "c"):
        raise OutOfScope(f"target {target!r}")
    return _Built(targets.build(as_func(mod), "llvm"))


__getattr__ = module_getattr("tvm.runtime")
