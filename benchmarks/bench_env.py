"""What a benchmark does before it measures: run without the BLAS overrides.

``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` (set on some machines for older OpenBLAS
builds) make a current numpy pick a slower kernel, so numpy's side of a comparison
would be wrong.  OpenBLAS reads them once, when numpy is imported; a benchmark that
finds them set runs itself again, once, in a child process whose environment lacks
them (that command alone: the tests and CI keep their environment as it is).

Example::

    >>> rerun_without_blas_overrides("bench.py", [], env={"PATH": "/bin"}) is None
    True
"""

from __future__ import annotations

import os
import subprocess
import sys

BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: set in the child, so it never re-runs itself again
CHILD = "CUVIL_BENCH_CHILD"


def rerun_without_blas_overrides(script: str, argv, env=None):
    """The exit status of ``script argv`` run again without :data:`BLAS_VARS`, or None
    when ``env`` (default: this process's) sets none of them: measure here."""
    env = os.environ if env is None else env
    if not any(v in env for v in BLAS_VARS) or CHILD in env:
        return None
    child = {k: v for k, v in env.items() if k not in BLAS_VARS}
    child[CHILD] = "1"
    print(f"(re-running with {' and '.join(v for v in BLAS_VARS if v in env)} unset for "
          "this command: they slow a current numpy's BLAS)", flush=True)
    args = list(sys.argv[1:] if argv is None else argv)
    return subprocess.call([sys.executable, script] + args, env=child)


__all__ = ["BLAS_VARS", "rerun_without_blas_overrides"]
