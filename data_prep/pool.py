"""A small process pool that bounds every task in time and memory.

``multiprocessing.Pool`` cannot abandon one hung task: a C++ parser stuck on a hostile file would stall
the whole run. Here each worker takes one task at a time over its own pipe; the parent watches the
clock and kills a worker that overruns (or that dies, e.g. killed for memory), reports that task as
failed, and starts a fresh worker. Results are yielded as they finish, tagged with their index.

A worker never outlives the parent: on Linux the kernel kills it when the parent dies (even mid-task),
and everywhere an idle worker checks every second that its parent is still there. Without this, a
``kill -9`` of the parent would leave workers waiting forever on pipes that other workers, forked
later, still hold open, and holding the parent's stdout.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import wait


@dataclass
class TaskError:
    """A task that failed; ``reason`` is what to report."""

    reason: str


def _limit_worker(max_memory_gb: float) -> None:
    # Ctrl-C is the parent's to handle: it stops the workers itself and cleans up.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # One compute thread per worker: spinning OpenMP threads make 2 workers slower than 1 here.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    if max_memory_gb and max_memory_gb > 0:
        import resource

        limit = int(max_memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel for SIGKILL when the parent dies (Linux); exit now if it is already gone.

    The kernel ties the signal to the parent *thread* that started the worker: run_tasks starts and
    drives its workers from one thread, which lives as long as the pool does."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl: the polling in _next_message still ends an idle orphan
    if os.getppid() != parent_pid:
        os._exit(0)


def _next_message(conn, parent_pid: int):
    """The next task, or None when the parent closed the pipe or is gone."""
    while not conn.poll(1.0):
        if os.getppid() != parent_pid:
            return None
    try:
        return conn.recv()
    except EOFError:
        return None


def _worker_loop(conn, fn: Callable, max_memory_gb: float, parent_pid: int) -> None:
    _die_with_parent(parent_pid)
    _limit_worker(max_memory_gb)
    while True:
        msg = _next_message(conn, parent_pid)
        if msg is None:
            return
        index, arg = msg
        try:
            result = fn(arg)
        except MemoryError:
            result = TaskError(f"out of memory (limit {max_memory_gb} GiB)")
        except Exception as err:  # every task failure is reported, never fatal
            result = TaskError(f"{type(err).__name__}: {err}")
        conn.send((index, result))


class _Worker:
    def __init__(self, ctx, fn, max_memory_gb):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_loop, args=(child, fn, max_memory_gb, os.getpid()), daemon=True)
        self.proc.start()
        child.close()
        self.task: int | None = None
        self.started = 0.0

    def give(self, index: int, arg) -> None:
        self.task, self.started = index, time.monotonic()
        self.conn.send((index, arg))

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


def run_tasks(fn: Callable, args: Iterable, num_workers: int = 1, timeout: float | None = 60.0,
              max_memory_gb: float = 0.0) -> Iterator[tuple[int, object]]:
    """Yield ``(index, fn(arg) or TaskError)`` for every arg, in completion order.

    ``num_workers=0`` runs in this process (no timeout or memory bound: for debugging).
    ``fn`` must be a picklable top-level function.
    """
    args = list(args)
    if num_workers <= 0:
        for i, a in enumerate(args):
            try:
                yield i, fn(a)
            except Exception as err:
                yield i, TaskError(f"{type(err).__name__}: {err}")
        return
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    workers = [_Worker(ctx, fn, max_memory_gb) for _ in range(min(num_workers, max(len(args), 1)))]
    todo = iter(enumerate(args))
    try:
        for w in workers:
            _feed(w, todo)
        while any(w.task is not None for w in workers):
            busy = [w for w in workers if w.task is not None]
            ready = wait([w.conn for w in busy], timeout=_next_deadline(busy, timeout))
            for w in busy:
                if w.conn in ready:
                    yield from _collect(w, workers, ctx, fn, max_memory_gb, todo)
                elif timeout is not None and time.monotonic() - w.started > timeout:
                    task = w.task
                    _replace(w, workers, ctx, fn, max_memory_gb, todo)
                    yield task, TaskError(f"timed out after {timeout:g} s")
    finally:
        for w in workers:
            w.kill()


def _feed(w: _Worker, todo) -> None:
    nxt = next(todo, None)
    if nxt is None:
        w.task = None
    else:
        w.give(*nxt)


def _next_deadline(busy: list[_Worker], timeout: float | None) -> float | None:
    if timeout is None:
        return None
    now = time.monotonic()
    return max(0.0, min(w.started + timeout - now for w in busy)) + 0.01


def _collect(w, workers, ctx, fn, max_memory_gb, todo):
    try:
        index, result = w.conn.recv()
    except (EOFError, OSError):
        # The worker died mid-task (segfault, OOM killer): report it and carry on with a new one.
        task = w.task
        w.proc.join(timeout=5)
        code = w.proc.exitcode
        _replace(w, workers, ctx, fn, max_memory_gb, todo)
        yield task, TaskError(f"worker process died (exit code {code})")
        return
    _feed(w, todo)
    yield index, result


def _replace(w, workers, ctx, fn, max_memory_gb, todo) -> None:
    w.kill()
    fresh = _Worker(ctx, fn, max_memory_gb)
    workers[workers.index(w)] = fresh
    _feed(fresh, todo)
