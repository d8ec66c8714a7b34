"""TVMScript of TVM's lowered GPU TIR: thread environments, ``T.allocate`` statements
and buffers declared over another buffer's data.

TVM prints a function after its GPU passes in this form (its thread-sync tests are
written in it); these read it into ordinary Cuvil IR:

* ``tx = T.env_thread("threadIdx.x")`` declares the thread variable ``tx``;
  ``T.launch_thread(tx, 4)`` launches it for the rest of the suite: a loop
  ``for tx in T.thread_binding(4, thread="threadIdx.x")`` around what follows;
* ``B = T.allocate([24], "float32", "shared")`` allocates for the rest of the suite
  (an ``Allocate`` whose body is what follows);
* ``B_1 = T.Buffer((24,), data=B)`` declares a buffer over that memory: ``B`` itself
  when the shape is the same, else an alias (:mod:`.buffer_alias`, as
  ``T.Buffer((16,), data=A.data)`` over a ``(4, 4)`` buffer ``A``);
* ``scope="shared.dyn"`` (TVM's dynamic shared memory) is ``"shared"``: Cuvil moves a
  kernel's shared memory to dynamic shared memory by itself beyond 48 KB.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... def f(A: T.Buffer((4, 4), "float32")):
    ...     tx = T.env_thread("threadIdx.x")
    ...     T.launch_thread(tx, 16)
    ...     A_1 = T.Buffer((16,), data=A.data)
    ...     A_1[tx] = T.float32(0)
    ... ''')
    >>> print(f.body)
    for tx in T.thread_binding(16, thread="threadIdx.x"):
        A[tx // 4, tx % 4] = T.float32(0)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..expr import Var
from ..stmt import Allocate
from .evaluate import Spec

#: TVM's scope names read as another Cuvil scope
SCOPE_ALIASES = {"shared.dyn": "shared"}


@dataclass(frozen=True)
class EnvThread:
    """``T.env_thread(tag)`` bound to a name: the variable a ``T.launch_thread`` binds."""

    tag: str
    var: Var


class TVMLoweredMixin:
    """The Builder's statements of TVM's lowered GPU TIR (module docstring)."""

    def b_env_thread(self, tag):
        return Spec("env_thread", (tag,))

    def env_thread(self, name: str, v: Spec, t):
        tag = v.args[0] if v.args else v.kwargs.get("thread_tag")
        if not isinstance(tag, str):
            raise self.error("T.env_thread expects a thread tag, e.g. "
                             "T.env_thread(\"threadIdx.x\")", t)
        self.bind(name, EnvThread(tag, Var(name, "int32")))

    def allocate_rest(self, name: str, v: Spec, ctx, rest, t):
        """``B = T.allocate(...)``: an Allocate of ``B`` around the rest of the suite."""
        buf = self.make_buffer(name, v, t)
        self.let_rest = Allocate(buf, self.rest_of_suite(buf, "buffer", ctx, rest))
        return "consumed"


__all__ = ["EnvThread", "SCOPE_ALIASES", "TVMLoweredMixin"]
