"""A small scalar evaluator of block-level TIR, used by the schedule tests only while
``T.interpret`` (the project's reference interpreter) is not available in the tree.

It runs a PrimFunc on numpy arrays in place: loops, blocks (predicate, iter-var
binding, ``init`` when every reduce iter var is at its minimum, alloc_buffers),
stores, conditionals and the scalar expressions the test workloads use.
"""

from __future__ import annotations

import numpy as np

from cuvil_tir import dtype as D

_BIN = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
    "FloorDiv": lambda a, b: a // b, "FloorMod": lambda a, b: a % b,
    "Min": lambda a, b: min(a, b), "Max": lambda a, b: max(a, b),
    "EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b,
    "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b,
    "And": lambda a, b: bool(a) and bool(b), "Or": lambda a, b: bool(a) or bool(b),
}
_CALL = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
         "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "floor": np.floor, "ceil": np.ceil}


class _Eval:
    def __init__(self):
        self.env: dict = {}
        self.bufs: dict = {}

    def expr(self, e):
        name = type(e).__name__
        if name in ("Var", "SizeVar"):
            return self.env[id(e)]
        if name in ("IntImm", "FloatImm"):
            return np.dtype(D.to_numpy(e.dtype)).type(e.value)
        if name in _BIN:
            return _BIN[name](self.expr(e.a), self.expr(e.b))
        if name == "Div":
            a, b = self.expr(e.a), self.expr(e.b)
            return a / b if D.is_float(e.dtype) else int(a / b)
        if name == "Not":
            return not self.expr(e.a)
        if name == "Select":
            return self.expr(e.true_value) if self.expr(e.condition) else \
                self.expr(e.false_value)
        if name == "Cast":
            return np.dtype(D.to_numpy(e.dtype)).type(self.expr(e.value))
        if name == "BufferLoad":
            return self.bufs[id(e.buffer)][tuple(int(self.expr(i)) for i in e.indices)]
        if name == "Call":
            if e.op == "if_then_else":
                c, a, b = e.args
                return self.expr(a) if self.expr(c) else self.expr(b)
            return np.dtype(D.to_numpy(e.dtype)).type(_CALL[e.op](*[self.expr(a)
                                                                     for a in e.args]))
        raise TypeError(f"reference evaluator: unsupported expression {name}")

    def stmt(self, s):
        name = type(s).__name__
        if name == "For":
            lo, n = int(self.expr(s.min)), int(self.expr(s.extent))
            for v in range(lo, lo + n):
                self.env[id(s.loop_var)] = v
                self.stmt(s.body)
        elif name == "SeqStmt":
            for x in s.seq:
                self.stmt(x)
        elif name == "BufferStore":
            arr = self.bufs[id(s.buffer)]
            arr[tuple(int(self.expr(i)) for i in s.indices)] = self.expr(s.value)
        elif name == "IfThenElse":
            if self.expr(s.condition):
                self.stmt(s.then_case)
            elif s.else_case is not None:
                self.stmt(s.else_case)
        elif name == "LetStmt":
            self.env[id(s.var)] = self.expr(s.value)
            self.stmt(s.body)
        elif name == "Allocate":
            self._alloc(s.buffer)
            self.stmt(s.body)
        elif name == "BlockRealize":
            self._realize(s)
        elif name != "Evaluate":
            raise TypeError(f"reference evaluator: unsupported statement {name}")

    def _alloc(self, buf):
        shape = tuple(int(self.expr(x)) for x in buf.shape)
        self.bufs[id(buf)] = np.zeros(shape, D.to_numpy(buf.dtype))

    def _realize(self, br):
        if not self.expr(br.predicate):
            return
        values = [self.expr(v) for v in br.iter_values]
        blk = br.block
        at_start = True
        for iv, v in zip(blk.iter_vars, values):
            self.env[id(iv.var)] = v
            if iv.kind == "reduce" and v != self.expr(iv.dom.min):
                at_start = False
        for b in blk.alloc_buffers:
            self._alloc(b)
        if blk.init is not None and at_start:
            self.stmt(blk.init)
        self.stmt(blk.body)


def evaluate(func, *arrays) -> None:
    """Run ``func`` on ``arrays`` (one per parameter), writing outputs in place."""
    ev = _Eval()
    for p, a in zip(func.params, arrays):
        if hasattr(p, "shape"):
            ev.bufs[id(p)] = a
            for dim, n in zip(p.shape, a.shape):
                if type(dim).__name__ in ("Var", "SizeVar"):
                    ev.env[id(dim)] = n
        else:
            ev.env[id(p)] = a
    with np.errstate(all="ignore"):
        ev.stmt(func.body)
