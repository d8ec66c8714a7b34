"""Groups of a block's threads run as interleaved tasks (warp specialization).

A kernel whose warps take different paths and synchronise through mbarriers (a
producer warpgroup copying into a ring of shared buffers, consumer warpgroups
computing on them) cannot run thread after thread: a consumer waits for a copy the
producer has not issued yet.  The GPU interpreter runs each side of such a branch as
a *task* (the group of threads that took it) and switches between tasks only where
one blocks: at an ``mbarrier_wait`` whose phase is still open.  A blocked task
resumes once its phase completed; when every unfinished task is blocked the kernel
would hang on a GPU, and the interpreter reports the deadlock as a
:class:`~cuvil_tir.errors.LoweringError` naming each waiting statement.

One task runs at a time (each on a Python thread, handing a baton over), so the
order of a run is fixed: a task runs until it blocks or ends, then the next one able
to go (in branch order, a task's own groups first) resumes.  The interpreter's frame (variable slots and
buffer arrays) is saved when a task hands over and restored when it resumes.

Example::

    >>> Tasks.__name__
    'Tasks'
"""

from __future__ import annotations

import threading

from ..errors import LoweringError


class _Aborted(Exception):
    """Ends a task's Python thread after another task failed."""


class _Task:
    def __init__(self, index: int, threads: list, body):
        self.index, self.threads, self.body = index, threads, body
        self.done = False
        self.waiting = None           # (ready predicate, what it waits for)
        self.saved = None             # the frame while another task runs
        self.thread = None

    def ready(self) -> bool:
        return not self.done and (self.waiting is None or self.waiting[0]())


class Tasks:
    """The tasks of one block (module doc); ``block`` (the interpreter's
    :class:`~cuvil_tir.interp.gpu._Block`) and ``frame`` are the state a task switch
    saves and restores.  A task that reaches another divergent branch splits again:
    it waits (as a task) until its own groups have finished.

    Example::

        >>> Tasks(None, None).current is None
        True
    """

    def __init__(self, block, frame):
        self.g, self.frame = block, frame
        self.cv = threading.Condition()
        self.tasks: list = []
        self.turn = None
        self.error = None
        self.current = None

    # the frame a task sees ----------------------------------------------------------
    def _save(self, task) -> None:
        g = self.g
        task.saved = (self.frame.env[:], self.frame.bufs[:], g.cur, g.active)

    def _restore(self, task) -> None:
        env, bufs, cur, active = task.saved
        self.frame.env[:] = env
        self.frame.bufs[:] = bufs
        self.g.active = active
        self.g.set_thread(cur)
        self.current = task

    # running ------------------------------------------------------------------------
    def split(self, parts) -> None:
        """Run ``parts`` (``(thread indices, closure)`` each) as tasks until all end;
        the first error of any task is raised in the interpreter's thread."""
        env, bufs, cur, active = (self.frame.env[:], self.frame.bufs[:], self.g.cur,
                                  self.g.active)
        with self.cv:
            kids = []
            for threads, body in parts:
                t = _Task(len(self.tasks), threads, body)
                t.saved = (env[:], bufs[:], threads[0], threads)
                t.thread = threading.Thread(target=self._main, args=(t,), daemon=True)
                self.tasks.append(t)
                kids.append(t)
        for t in kids:
            t.thread.start()
        if self.current is not None:
            # a task splitting again waits for its groups, as a task; they go first
            self.block(lambda: all(t.done for t in kids), None, kids[0])
            return
        with self.cv:
            self._hand_over(kids[0])
            self.cv.wait_for(lambda: self.error is not None or all(t.done for t in kids))
            if self.error is not None:
                self.turn = "abort"
                self.cv.notify_all()
        for t in self.tasks:
            t.thread.join()
        self.tasks, self.current = [], None
        self.frame.env[:], self.frame.bufs[:] = env, bufs
        self.g.active = active
        self.g.set_thread(cur)
        if self.error is not None:
            err, self.error = self.error, None
            raise err

    def _main(self, task) -> None:
        with self.cv:
            self.cv.wait_for(lambda: self.turn in (task, "abort"))
            if self.turn == "abort":
                return
            self._restore(task)
        try:
            task.body()
        except _Aborted:
            return
        except Exception as err:      # raised by split, in the interpreter's thread
            with self.cv:
                self.error = err
                self.cv.notify_all()
            return
        with self.cv:
            task.done = True
            nxt = self._next(task)
            if nxt is not None:
                self._hand_over(nxt)
            elif not all(t.done for t in self.tasks):
                self.error = self._deadlock()
            self.cv.notify_all()

    def _next(self, task):
        n = len(self.tasks)
        for k in range(1, n + 1):
            t = self.tasks[(task.index + k) % n]
            if t.ready():
                return t
        return None

    def _hand_over(self, task) -> None:
        self.turn = task
        self.cv.notify_all()

    def block(self, ready, what, first=None) -> None:
        """The running task waits until ``ready()``: other tasks run meanwhile,
        ``first`` (a task) or the next able to (``what()``: the waiting statement and
        what it lacks, for a deadlock)."""
        if ready():
            return
        task = self.current
        with self.cv:
            task.waiting = (ready, what)
            nxt = first or self._next(task)
            if nxt is None:
                err = self._deadlock()
                task.waiting = None
                raise err
            self._save(task)
            self._hand_over(nxt)
            self.cv.wait_for(lambda: self.turn in (task, "abort"))
            if self.turn == "abort":
                raise _Aborted()
            task.waiting = None
            self._restore(task)

    def _deadlock(self) -> LoweringError:
        g = self.g
        lines = []
        for t in self.tasks:
            if t.done or t.waiting is None or t.waiting[1] is None:
                continue
            lo, hi = g.threads[t.threads[0]], g.threads[t.threads[-1]]
            what = t.waiting[1]
            lines.append(f"threads {lo}..{hi} wait at {what() if callable(what) else what}")
        return LoweringError(
            f"deadlock in block {g.block}: every group of threads that has not finished "
            "waits on an mbarrier phase no other group can complete:\n  "
            + "\n  ".join(lines) + "\n(on a GPU the kernel would hang: a missing "
            "mbarrier_arrive or copy, an arrival count above the threads that arrive, or "
            "a wait for the wrong parity)")


__all__ = ["Tasks"]
