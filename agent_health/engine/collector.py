"""Keeping the garbage collector off what a run only reads.

Everything that exists when the tests start (the loaded tests, the configuration, the imported
modules) lives for the whole run, yet every full collection walked all of it again while the run
built its results: at 1,000 HTTP tests and concurrency 64 one such collection took about a tenth
of a millisecond per test (benchmarks/connectors_http.py). `gc.freeze()` moves those objects into
the permanent generation, which the collector never walks; they are still freed by reference
counting as usual, only a reference cycle among them waits for the unfreeze.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze what exists now for the duration of the block. On leaving, the frozen objects go
    back under the collector, unless something had frozen objects before (the CLI freezes its
    imports and loaded tests for the whole process; a run nested in another leaves the outer
    run's freeze to it)."""
    owner = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if owner:
            gc.unfreeze()
