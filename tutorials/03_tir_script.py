"""Tutorial 03: write a kernel in the text form, save it, load it, compile it.

Run:  python tutorials/03_tir_script.py

`@T.prim_func` turns a Python function written in TVMScript-like syntax into a PrimFunc
(names such as the size N come from the enclosing scope). `print(func)` writes the same
text form; `T.parse` reads it back, structurally equal. The pass instruments show what
each lowering pass cost.
"""

import os
import tempfile

import numpy as np

import cuvil_tir as T
import targets

N = 64


@T.prim_func
def scale_add(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32"),
              C: T.Buffer((N, N), "float32")):
    for i, j in T.grid(N, N):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj], B[vi, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = A[vi, vj] * T.float32(2) + B[vi, vj]


print("== the kernel, as Cuvil prints it")
text = str(scale_add)
print(text)

path = os.path.join(tempfile.mkdtemp(prefix="cuvil_"), "scale_add.tir")
with open(path, "w") as fh:
    fh.write(text)
print(f"== saved to {path}")

with open(path) as fh:
    loaded = T.parse(fh.read())
assert T.structural_equal(loaded, scale_add)
print("== loaded back: structurally equal to the original")

timing = T.transform.PassTiming()
with T.transform.PassContext(instruments=[timing]):
    mod = targets.build(loaded, "llvm")
print("== pass timing of the build")
print(timing.table())

rng = np.random.default_rng(0)
a = rng.standard_normal((N, N)).astype("float32")
b = rng.standard_normal((N, N)).astype("float32")
c = np.zeros((N, N), "float32")
mod(a, b, c)
np.testing.assert_allclose(c, a * 2 + b, rtol=1e-6)
print("== compiled from the loaded text; result matches numpy")
print(f"== the same file from the shell:  cuvil build {path} --target llvm --emit asm")
