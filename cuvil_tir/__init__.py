"""Cuvil TIR: the tensor IR, its te-style DSL, text form, analysis and lowering.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((128,), name="A")
    >>> B = T.compute((128,), lambda i: A[i] + 1.0, name="B")
    >>> f = T.create_prim_func([A, B])
    >>> f.name
    'main'
"""

#: set before the submodules load: build keys read it while the package imports
__version__ = "0.1.0"

from . import dtype
from .errors import (ArgumentError, CodegenError, CuvilError, DivisionByZeroError, DTypeError,
                     LoweringError, ParseError, ScheduleError, ShapeError, TargetError)
from .errors import (BoundsCheckError, DivergentBarrierError, HostFeatureError, NestingError,
                     RaceError, RuntimeCheckError)
from .node import Node, same
from .expr import (Add, And, BinaryOp, Broadcast, BufferLoad, Call, Cast, CmpOp, Div,
                   EQ, Expr, FloatImm, FloorDiv, FloorMod, GE, GT, IntImm, LE, LT, Let,
                   Max, Min, Mod, Mul, NE, Not, Or, Ramp, Select, SizeVar, StringImm, Sub,
                   Var, cast, const)
from .buffer import Buffer, decl_buffer
from .stmt import (Allocate, Block, BlockRealize, BufferRegion, BufferStore, Evaluate,
                   For, IfThenElse, IterVar, LetStmt, Range, SeqStmt, Stmt, seq)
from .stmt import AssertStmt, assert_
from .function import PrimFunc
from .ir_module import IRModule, device_launch, parallel_launch
from .op import (abs, all, any, bitwise_and, bitwise_not, bitwise_or, bitwise_xor,
                 call_extern, ceil, cos, erf, exp, exp2, floor, floordiv,
                 floormod, fma, if_then_else, infinity, log, log2, log10, logical_not, max_value,
                 maximum, min_value, minimum, pow, round, rsqrt, select, sigmoid, sin,
                 shift_left, shift_right, size_var, sqrt, tanh, trunc, truncdiv, truncmod,
                 var)
from .te import (Tensor, compute, create_prim_func, max, min, placeholder, prod,
                 reduce_axis, sum)
from .structural import assert_structural_equal, structural_equal, structural_hash
from .fingerprint import fingerprint
from .visitor import Mutator, Visitor, post_order_visit, substitute
from .printer import to_text
from .interpreter import interpret
from .parser import ir_module, module_attrs, parse, prim_func
from . import target
from .target import (Program, Target, TargetKind, get_target_kind, list_targets, lower,
                     register_target)
from .script import *  # noqa: F401,F403 - TVMScript names: T.float32, T.serial, T.block, ...
from . import transform
from .debug import diff, graph

