"""The error hierarchy shared by every Cuvil package.

Every error carries a stable ``code`` (``CVL-E1xx``) documented with its usual fix in
``docs/errors.md``.  Messages say what was expected, what was found and where.

Example::

    >>> import cuvil_tir as T
    >>> try:
    ...     T.var("i") + T.const(1.0, "float32")
    ... except T.DTypeError as err:
    ...     print(err.code)
    CVL-E101
"""

from __future__ import annotations


class CuvilError(Exception):
    """Root of every error Cuvil raises on purpose.

    Example::

        >>> issubclass(DTypeError, CuvilError)
        True
    """

    code = "CVL-E100"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class DTypeError(CuvilError, TypeError):
    """A dtype is unknown, or two dtypes are mixed in a way Cuvil will not guess.

    Example::

        >>> DTypeError("expected int32, found float32").code
        'CVL-E101'
    """

    code = "CVL-E101"


class ShapeError(CuvilError, ValueError):
    """A shape, rank or index count does not match.

    Example::

        >>> ShapeError("expected 2 indices, found 3").code
        'CVL-E102'
    """

    code = "CVL-E102"


class ScheduleError(CuvilError):
    """A schedule primitive was refused; the schedule is unchanged.

    ``render`` (a function of no arguments returning text, or None) appends the IR to
    the message the first time the message is read: a refused candidate that nobody
    reads (the tuner's) never pays for printing the function.

    Example::

        >>> ScheduleError("split: factors disagree with extent").code
        'CVL-E103'
        >>> err = ScheduleError("fuse: not adjacent", render=lambda: "for i ...")
        >>> print(err.message)
        fuse: not adjacent
        in the IR:
        for i ...
    """

    code = "CVL-E103"
    _render = None

    def __init__(self, message: str, render=None):
        super().__init__(message)
        self._render = render

    @property
    def message(self) -> str:
        render = self._render
        if render is not None:
            self._render = None
            try:
                text = render()
            except Exception:  # the IR text is a courtesy; never hide the real error
                text = None
            if text:
                self._message += "\nin the IR:\n" + text
        return self._message

    @message.setter
    def message(self, value: str) -> None:
        self._message = value

    def __reduce__(self):
        # the renderer holds the IR; send the rendered text across processes instead
        state = dict(self.__dict__, _message=self.message)
        state.pop("_render", None)
        return (_rebuild_schedule_error, (type(self), state))


def _rebuild_schedule_error(cls, state):
    err = cls.__new__(cls)
    Exception.__init__(err, state["_message"])
    err.__dict__.update(state)
    return err


class ScheduleArgumentError(ScheduleError):
    """An argument has the wrong type or value (a handle of the wrong kind, a bad tag).

    Example::

        >>> ScheduleArgumentError("bind: unknown thread axis").code
        'CVL-E103'
    """


class UnknownTensorIntrinError(ScheduleArgumentError, ValueError):
    """No tensor intrinsic is registered under the name asked for.

    A wrong argument value, hence also a ``ValueError`` (as TVM raises).

    Example::

        >>> issubclass(UnknownTensorIntrinError, ValueError)
        True
    """


def render_ir(func, highlight=None) -> str:
    """The text of ``func`` with ``highlight`` (a statement) marked when supported.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> "B" in render_ir(f)
        True
    """
    # any IR node writes itself (through the printer, which imports this module)
    return func.script(highlight=highlight)


def schedule_error(cls, primitive: str, reason: str, func=None, node=None):
    """Build ``cls`` with message ``"<primitive>: <reason>"``; with ``func``, the IR
    (``node`` marked) is appended when the message is first read, not now.

    This is the one error builder of the schedule layer (and of the tensor-intrinsic
    registry, :mod:`cuvil_tir.tensor_intrin`).  A reason that already names
    the primitive in its own words (``"argument 2, 'factors' to split: ..."``) is used
    as the whole message.

    Example::

        >>> e = schedule_error(ScheduleError, "fuse", "loops i and k are not adjacent")
        >>> (e.primitive, e.reason)
        ('fuse', 'loops i and k are not adjacent')
        >>> str(schedule_error(ScheduleArgumentError, "split", "argument 2, 'factors' to split: "
        ...                    "expected a list, found 3"))
        "[CVL-E103] argument 2, 'factors' to split: expected a list, found 3"
    """
    named = reason.startswith(("argument ", "option ")) and f" to {primitive}: " in reason
    message = reason if named else f"{primitive}: {reason}"
    render = None
    if func is not None:
        def render():
            return render_ir(func, node)
    err = cls(message, render=render)
    err.primitive = primitive
    err.reason = reason
    err.node = node
    return err


class LoweringError(CuvilError):
    """The IR is ill-formed or cannot be lowered.

    Example::

        >>> LoweringError("undefined variable i").code
        'CVL-E104'
    """

    code = "CVL-E104"


class DivisionByZeroError(LoweringError, ZeroDivisionError):
    """An integer division or modulo by the constant zero, refused when it is built.

    A divisor that is zero only at run time is not an error: see the semantics of
    integer division in :mod:`cuvil_tir.arith.fold`.

    Example::

        >>> import cuvil_tir as T
        >>> try:
        ...     T.var("i") // 0
        ... except T.DivisionByZeroError as err:
        ...     print(err.code)
        CVL-E104
    """


class CodegenError(CuvilError):
    """A code generator met IR it cannot translate.

    Example::

        >>> CodegenError("unsupported node").code
        'CVL-E105'
    """

    code = "CVL-E105"


class TargetError(CuvilError):
    """A target is unknown, misconfigured or registered twice.

    Example::

        >>> TargetError("unknown target 'foo'").code
        'CVL-E106'
    """

    code = "CVL-E106"


class ArgumentError(CuvilError, TypeError):
    """An argument passed to a built module is wrong; no native code ran.

    Example::

        >>> ArgumentError("argument 0 'A': expected float32, got int64").code
        'CVL-E107'
    """

    code = "CVL-E107"


class ParseError(CuvilError, SyntaxError):
    """The text form could not be parsed; ``line`` and ``column`` are 1-based.

    Example::

        >>> err = ParseError("unknown name 'X'", line=3, column=5, source_line="    X[0]")
        >>> (err.line, err.column)
        (3, 5)
    """

    code = "CVL-E108"

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 source_line: str | None = None, filename: str | None = None):
        self.line = line
        self.column = column
        self.source_line = source_line
        self.filename = filename
        where = ""
        if line is not None:
            where = f"{filename or '<text>'}:{line}:{column or 0}: "
        text = where + message
        if source_line is not None and column is not None:
            text += "\n    " + source_line.rstrip("\n") + "\n    " + " " * (column - 1) + "^"
        CuvilError.__init__(self, text)
        self.args = (text,)


ALL_ERRORS = (CuvilError, DTypeError, ShapeError, ScheduleError, LoweringError,
              DivisionByZeroError, CodegenError, TargetError, ArgumentError, ParseError)


class RaceError(LoweringError):
    """Two GPU threads touched one shared address in the same phase (between two
    barriers) and at least one wrote: found by ``T.interpret(..., check_races=True)``.
    ``buffer``, ``address``, ``threads`` and ``statements`` name the two accesses.

    Example::

        >>> RaceError("race on S").code
        'CVL-E200'
    """

    code = "CVL-E200"

    def __init__(self, message: str, buffer=None, address=None, threads=(), statements=()):
        self.buffer, self.address = buffer, address
        self.threads, self.statements = tuple(threads), tuple(statements)
        super().__init__(message)


class DivergentBarrierError(LoweringError):
    """A ``__syncthreads()`` would be needed inside control flow that depends on the
    thread; the build is refused (the message marks the statement).

    Example::

        >>> DivergentBarrierError("barrier inside if tx < 4").code
        'CVL-E201'
    """

    code = "CVL-E201"
ALL_ERRORS = ALL_ERRORS + (RaceError, DivergentBarrierError)


class RuntimeCheckError(TargetError):
    """A run-time check (``T.assert_``) failed in compiled code or in the interpreter;
    nothing after the failing check ran.  ``values`` holds the run-time values named
    in the message.

    Example::

        >>> RuntimeCheckError("n = 0 must be positive").code
        'CVL-E230'
    """

    code = "CVL-E230"

    def __init__(self, message: str, values=()):
        self.values = tuple(values)
        super().__init__(message)


class BoundsCheckError(RuntimeCheckError):
    """An access outside its buffer, caught by a bounds-checked build
    (``Target("llvm", bounds_check=True)``) before it happened.  The message names the
    buffer, the index, the buffer's shape and the statement; ``values`` are the index
    then the extents, one per dimension.

    Example::

        >>> BoundsCheckError("out-of-bounds read of A[8] (shape (8,))").code
        'CVL-E231'
    """

    code = "CVL-E231"


ALL_ERRORS = ALL_ERRORS + (RuntimeCheckError, BoundsCheckError)


class AllocationError(CodegenError):
    """No placement of a static memory's buffers satisfies its capacity and banks (the
    memory planner's address step; an accelerator's scratchpads).

    Example::

        >>> AllocationError("x").code
        'CVL-E171'
    """

    code = "CVL-E171"


ALL_ERRORS = ALL_ERRORS + (AllocationError,)


class HostFeatureError(TargetError):
    """A module built for another CPU (``mcpu``/``mattr``) was asked to run on a host
    that lacks CPU features its code may use; running it would stop the process with
    SIGILL.  Building and reading its code stay allowed.  ``missing`` lists the
    features (LLVM's names, ``avx512fp16``).

    Example::

        >>> HostFeatureError("this host lacks +avx512fp16", ("avx512fp16",)).code
        'CVL-E240'
    """

    code = "CVL-E240"

    def __init__(self, message: str, missing=()):
        self.missing = tuple(missing)
        super().__init__(message)


ALL_ERRORS = ALL_ERRORS + (HostFeatureError,)


class NestingError(LoweringError):
    """IR nested deeper than Cuvil can walk, even on the big stack of its retry
    (:mod:`cuvil_tir.deep`): thousands of levels of one expression.

    Example::

        >>> NestingError("nested deeper than 120000 frames").code
        'CVL-E250'
    """

    code = "CVL-E250"


ALL_ERRORS = ALL_ERRORS + (NestingError,)


def check_error(kind: str, message: str, values=()) -> RuntimeCheckError:
    """The error a failed ``AssertStmt`` of ``kind`` raises.

    Example::

        >>> type(check_error("bounds", "A[8]")).__name__
        'BoundsCheckError'
    """
    cls = BoundsCheckError if kind == "bounds" else RuntimeCheckError
    return cls(message, values)
