"""Measurement through a ``concurrent.futures.Executor``, every deadline kept by a parent.

The tuner submits :func:`measure_task` (a module-level function of one dict, so any
executor can ship it: the default local process pool, or a Dask ``distributed``
client's ``client.get_executor()`` unchanged).  The task is the *supervisor*: it never
runs candidate code.  It keeps a warm server process per executor slot (started once
with ``python -m schedules.tune.server``; it imports Cuvil once) and asks it to fork
one child per candidate.  The child starts its own session (its own process group) and
runs :func:`.measure.run_candidate`, writing its messages into a pipe the supervisor
holds.  The supervisor alone enforces the deadlines (``timeout_s`` to build, then
``timeout_s`` to run once the child says ``"built"``) and kills the child's whole process
group when one passes; a child that dies without an outcome is a ``"crash"`` with its
signal.  So a segfault, an abort or a hang ends only that child: never the server, the
executor's worker, or the tuner.

Example::

    >>> import cuvil_tir as T, schedules as S
    >>> A = T.placeholder((4,), name="A")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
    >>> out = measure_task({"func": str(f), "trace": S.Schedule(f).trace.as_json(),
    ...                     "decisions": [], "target": "llvm", "min_repeat_ms": 1})
    >>> out["kind"], out["seconds"] > 0, "host" in out["info"]
    ('ok', True, True)
"""

from __future__ import annotations

import functools
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from cuvil_tir.errors import TargetError
from cuvil_tir.target import get_target_kind, list_targets
from . import measure as _measure

#: seconds a new server may take to import Cuvil before it counts as failed to start
STARTUP_S = 120.0
#: seconds (at least; 10 x timeout_s when more) for the untuned reference outputs,
#: computed once per function and machine (a naive GEMM of 2048^3 takes many seconds)
REFERENCE_S = 300.0

_HEADER = struct.Struct("!Q")


def _send(sock, obj, fds=()) -> None:
    data = pickle.dumps(obj)
    if fds:
        socket.send_fds(sock, [_HEADER.pack(len(data))], list(fds))
    else:
        sock.sendall(_HEADER.pack(len(data)))
    sock.sendall(data)


def _recv_exact(read, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _recv(sock, want_fds: bool = False):
    """One framed object (and the fds sent with it), or None at end of stream."""
    fds: list = []
    if want_fds:
        head, fds, _, _ = socket.recv_fds(sock, _HEADER.size, 1)
        if not head:
            return None, fds
        rest = _recv_exact(sock.recv, _HEADER.size - len(head))
        head = head + (rest or b"")
    else:
        head = _recv_exact(sock.recv, _HEADER.size)
    if head is None or len(head) < _HEADER.size:
        return None, fds
    data = _recv_exact(sock.recv, _HEADER.unpack(head)[0])
    return (None if data is None else pickle.loads(data)), fds


def _write_frame(fd: int, obj) -> None:
    data = pickle.dumps(obj)
    data = _HEADER.pack(len(data)) + data
    while data:
        data = data[os.write(fd, data):]


class _FrameReader:
    """Frames from a pipe read without blocking past what select said is there."""

    def __init__(self, fd: int):
        self.fd, self.buf = fd, b""

    def feed(self) -> bool:
        chunk = os.read(self.fd, 1 << 16)
        self.buf += chunk
        return bool(chunk)

    def frames(self):
        while len(self.buf) >= _HEADER.size:
            n = _HEADER.unpack(self.buf[:_HEADER.size])[0]
            if len(self.buf) < _HEADER.size + n:
                return
            data = self.buf[_HEADER.size:_HEADER.size + n]
            self.buf = self.buf[_HEADER.size + n:]
            yield pickle.loads(data)


# -- the warm server (a separate process, single-threaded, so fork is safe there) -----

def serve(fd: int) -> None:
    """Serve the supervisor at the other end of socket ``fd``: fork one isolated child
    per payload, report its pid (with the host's details), then its exit status.

    Example::

        >>> callable(serve)
        True
    """
    os.environ["CUVIL_TUNE_CHILD"] = "1"
    for name in list_targets():   # every installed backend loads once, here, not per child
        try:
            get_target_kind(name)
        except TargetError:
            pass                  # a broken plug-in fails the candidates that use it
    sock = socket.socket(fileno=fd)
    _send(sock, ("ready", os.getpid()))
    hosts: dict = {}
    warm: set = set()
    while True:
        payload, fds = _recv(sock, want_fds=True)
        if payload is None:
            return  # the supervisor went away
        wfd = fds[0]
        if payload.get("target") not in warm:  # the children inherit the warm parser
            warm.add(payload.get("target"))   # and code generator (0.2 s each)
            _measure.warm_up(payload.get("target"))
        pid = os.fork()
        if pid == 0:  # the isolated child
            code = 0
            try:
                os.setsid()
                sock.close()
                _measure.run_candidate(payload, functools.partial(_write_frame, wfd))
            except BaseException:  # noqa: BLE001 - the parent records the missing outcome
                code = 70
            finally:
                os._exit(code)
        os.close(wfd)
        target = payload.get("target")
        if target not in hosts:
            hosts[target] = _measure.host_info(target)
        _send(sock, ("pid", pid, hosts[target]))
        _send(sock, ("exit", _wait_child(pid, sock)))


def _wait_child(pid: int, sock) -> int:
    """Reap ``pid``; if the supervisor goes away meanwhile, kill the child and leave."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    while True:
        watch = [sock] + ([pidfd] if pidfd is not None else [])
        ready, _, _ = select.select(watch, [], [], 0.05 if pidfd is None else None)
        if sock in ready and not sock.recv(1, socket.MSG_PEEK):
            _kill_group(pid)
            os.waitpid(pid, 0)
            sys.exit(0)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if pidfd is not None:
                os.close(pidfd)
            _kill_group(pid)  # anything the child left behind in its group
            return os.waitstatus_to_exitcode(status)


def _kill_group(pid) -> None:
    if not isinstance(pid, int) or pid <= 1:
        return  # never 0 (our own group) or init, whatever a confused peer sent
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


# -- the supervisor side ---------------------------------------------------------------

class _Server:
    """A warm server process and the socket to it (one per thread of one process)."""

    def __init__(self):
        mine, theirs = socket.socketpair()
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "schedules.tune.server", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        self.sock, self.owner = mine, os.getpid()
        ready, _, _ = select.select([mine], [], [], STARTUP_S)
        msg = _recv(mine)[0] if ready else None
        if not msg or msg[0] != "ready":
            self.close()
            raise OSError(f"the tuning server did not start within {STARTUP_S:.0f} s")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


_LOCAL = threading.local()


def _server() -> _Server:
    srv = _mine()
    if srv is None or not srv.alive():
        srv = _LOCAL.server = _Server()
    return srv


def _mine():
    """This thread's server; not one a forked process inherited from its parent (the
    parent still talks to that one)."""
    srv = getattr(_LOCAL, "server", None)
    return srv if srv is not None and srv.owner == os.getpid() else None


def _drop_server() -> None:
    srv = _mine()
    if srv is not None:
        srv.close()
    _LOCAL.server = None


def measure_task(payload: dict) -> dict:
    """Measure one candidate in an isolated child and return ``{"kind", "seconds",
    "error", "info", "wall_s"}`` (``kind`` is ``"ok"`` or a failure kind; ``info`` the
    host, CPU and timing method; ``wall_s`` the task's own duration).

    ``payload``: ``func`` (text), ``trace`` (JSON), ``decisions``, ``target`` (text),
    optional ``func_ir`` (the function as pickled IR), ``scheduled`` (the scheduled
    function, pickled IR or text: built as it is), ``space``
    (the pickled space), ``timeout_s``, ``min_repeat_ms``, ``seed``.

    Example::

        >>> measure_task({"func": "not a function", "trace": "", "decisions": [],
        ...               "target": "llvm"})["kind"]
        'replay'
    """
    t0 = time.perf_counter()
    timeout = float(payload.get("timeout_s", 10.0))
    for attempt in (0, 1):  # a server that died between candidates is started again
        srv = _server()
        rfd, wfd = os.pipe()
        try:
            _send(srv.sock, payload, [wfd])
            ready, _, _ = select.select([srv.sock], [], [], STARTUP_S)
            msg = _recv(srv.sock)[0] if ready else None
        except OSError:
            msg = None
        os.close(wfd)
        if isinstance(msg, tuple) and len(msg) == 3 and msg[0] == "pid":
            break
        os.close(rfd)
        _drop_server()
        if attempt:
            return _outcome("crash", None, "the tuning server could not fork a child", {},
                            t0)
    pid, host = msg[1], msg[2]
    try:
        outcome = _supervise(pid, rfd, timeout)
    finally:
        os.close(rfd)
    status = _exit_status(srv)
    if outcome is None:
        outcome = ("crash", f"the child died ({_describe(status)}) before reporting an "
                   "outcome", {})
    kind, value, info = outcome
    info = {**host, **(info or {})}
    return _outcome(kind, value if kind == "ok" else None,
                    None if kind == "ok" else value, info, t0)


def _describe(status) -> str:
    if status is not None and status < 0:
        try:
            return f"signal {-status}, {signal.Signals(-status).name}"
        except ValueError:
            return f"signal {-status}"
    return f"exit code {status}"


def _supervise(pid: int, rfd: int, timeout: float):
    """Wait for the child's outcome under the deadlines; kill its group when one
    passes.  Returns the outcome, or None when the child died without one."""
    reader = _FrameReader(rfd)
    phase = "reference"
    deadline = time.monotonic() + max(REFERENCE_S, 10 * timeout)
    while True:
        left = deadline - time.monotonic()
        ready = select.select([rfd], [], [], max(0.0, left))[0] if left > 0 else []
        if not ready:
            _kill_group(pid)
            what = {"reference": "untuned reference outputs", "build": "build",
                    "run": "result"}[phase]
            return ("timeout", f"no {what} within the deadline ({timeout} s per candidate "
                    "phase; killed)", {})
        if not reader.feed():
            return None
        for frame in reader.frames():
            if frame[0] in ("reference", "built"):
                phase = "build" if frame[0] == "reference" else "run"
                deadline = time.monotonic() + timeout
            else:
                return frame


def _exit_status(srv: _Server):
    ready, _, _ = select.select([srv.sock], [], [], 30.0)
    msg = _recv(srv.sock)[0] if ready else None
    if not msg or msg[0] != "exit":
        _drop_server()  # out of step: start a fresh one for the next candidate
        return None
    return msg[1]


def _outcome(kind, seconds, error, info, t0) -> dict:
    return {"kind": kind, "seconds": seconds, "error": error, "info": info or {},
            "wall_s": time.perf_counter() - t0}


def local_executor(max_workers: int | None = None):
    """The default executor: a local process pool of ``max_workers`` slots (default:
    one per core).  Candidates build in parallel, one per slot; their timing holds a
    per-host lock (:func:`.measure.timing_lock`), so two are never timed at once.

    Example::

        >>> with local_executor(1) as ex:
        ...     ex.submit(abs, -2).result()
        2
    """
    n = max_workers or max(1, os.cpu_count() or 1)
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    return ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_follow_parent,
                               initargs=(os.getpid(),))


def _follow_parent(parent: int) -> None:
    """End this pool worker when the tuner that started it dies (a forked worker holds
    both ends of its task pipe, so it would otherwise wait forever); its warm server
    then sees its socket close and ends too."""
    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)
    threading.Thread(target=watch, daemon=True, name="cuvil-tune-parent-watch").start()


def slots(executor) -> int:
    """How many measurements ``executor`` runs at once (for sizing a batch).

    Example::

        >>> from concurrent.futures import ThreadPoolExecutor
        >>> with ThreadPoolExecutor(3) as ex:
        ...     slots(ex)
        3
    """
    n = getattr(executor, "_max_workers", None)
    if n:
        return int(n)
    client = getattr(executor, "_client", None)  # a distributed ClientExecutor
    if client is not None:
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:  # noqa: BLE001 - a client that cannot say: one at a time
            return 1
    return 1

