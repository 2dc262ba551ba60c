"""The bounded worker pool: a hung, crashing, raising or memory-hungry task costs only itself."""

from __future__ import annotations

import os
import time

from data_prep.pool import TaskError, run_tasks


def troublesome(x: int) -> int:
    if x == 3:
        time.sleep(60)  # hangs
    if x == 5:
        os._exit(3)  # dies like a segfaulting parser
    if x == 7:
        raise ValueError("bad seven")
    if x == 9:
        return len(bytearray(8 * 2**30))  # 8 GiB: over the memory limit
    return x * x


def test_failures_are_reported_and_the_rest_completes():
    t0 = time.monotonic()
    results = dict(run_tasks(troublesome, range(12), num_workers=2, timeout=1.5, max_memory_gb=2))
    assert time.monotonic() - t0 < 30
    assert sorted(results) == list(range(12))
    assert results[3] == TaskError("timed out after 1.5 s")
    assert results[5] == TaskError("worker process died (exit code 3)")
    assert results[7] == TaskError("ValueError: bad seven")
    assert isinstance(results[9], TaskError) and "memory" in results[9].reason
    assert all(results[i] == i * i for i in (0, 1, 2, 4, 6, 8, 10, 11))


def test_in_process_mode_matches():
    assert dict(run_tasks(abs, [-1, 2, -3], num_workers=0)) == {0: 1, 1: 2, 2: 3}
    assert dict(run_tasks(abs, [-1, 2, -3], num_workers=3)) == {0: 1, 1: 2, 2: 3}
