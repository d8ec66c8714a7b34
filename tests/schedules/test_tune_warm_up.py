"""The warm tuning server loads, once, what every candidate's build would otherwise
load in its forked child (the llvm kind's thread pool: about 0.01 s of each build
from the compile cache, 0.07 s with it off), and starts no thread before it forks."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_CODE = """
import threading
import targets.llvm.threadpool as pool
from schedules.tune.measure import warm_up
warm_up("llvm")
print(pool._POOL is not None, pool._POOL.workers(), threading.active_count())
"""


def test_warm_up_loads_the_parallel_runtime_and_starts_no_thread():
    out = subprocess.run([sys.executable, "-c", _CODE], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # loaded (children inherit it), no worker started, the server's one thread only
    assert out.stdout.split() == ["True", "0", "1"]
