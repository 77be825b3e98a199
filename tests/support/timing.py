"""Time limits in tests that follow the machine they run on. A fixed CPU workload is timed once per
test session and compared with its time on the quiet 2-core development machine the limits were
written for; `scaled(seconds)` stretches a limit by that factor, so a busy CI machine does not fail
a correct change, while a quiet one keeps the limits as written. (The benchmarks print the load
average beside their figures for the same reason; tests cannot just print, so they scale.)"""

from __future__ import annotations

import functools
import json
import os
import statistics
import time

# The workload's time on the development machine with nothing else running: its best run there.
REFERENCE_S = 0.075
RUNS = 5
# A limit stretched further than this would hide a hang rather than tolerate a slow machine.
MAX_FACTOR = 10.0


def workload_seconds() -> float:
    """One run of the fixed workload: Python bytecode, string formatting and JSON, as the harness
    and Dagster do."""
    started = time.perf_counter()
    total = 0
    for i in range(500_000):
        total += len(str(i * 7919))
    doc = {f"k{i}": [i, str(i), {"x": i * 0.5}] for i in range(3_000)}
    for _ in range(6):
        doc = json.loads(json.dumps(doc))
    return time.perf_counter() - started


@functools.cache
def machine_factor() -> float:
    """How many times slower this machine runs now than the reference (1.0 at best, at most
    MAX_FACTOR): the median of a few runs of the workload, measured on first use in a session."""
    median = statistics.median(workload_seconds() for _ in range(RUNS))
    return min(MAX_FACTOR, max(1.0, median / REFERENCE_S))


def scaled(seconds: float) -> float:
    """A time limit written for the quiet development machine, stretched to this one."""
    return seconds * machine_factor()


def load_factor() -> float:
    """Runnable processes per core over the last minute (1.0 at least, at most MAX_FACTOR): how much
    busier the machine is now than when nothing else runs. A limit measured once (`scaled`, or a
    command timed at the start of a session) is stretched by it where the machine's load can rise
    after the measurement, as on parallel workers."""
    return min(MAX_FACTOR, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
