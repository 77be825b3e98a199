"""Keeping the garbage collector off what a run only reads, and out of its way while it runs.

Everything that exists when the tests start (the loaded tests, the configuration, the imported
modules) lives for the whole run, yet every full collection walked all of it again while the run
built its results: at 1,000 HTTP tests and concurrency 64 one such collection took about a tenth
of a millisecond per test (benchmarks/connectors_http.py). `gc.freeze()` moves those objects into
the permanent generation, which the collector never walks; they are still freed by reference
counting as usual, only a reference cycle among them waits for the unfreeze.

While the tests run, the youngest generation is collected every `YOUNG_THRESHOLD` new objects
instead of Python's 700: the results on their way to the store and the reporters (up to the
sink's 256, some thirty containers each) are always that many young objects, so at 700 the
collector walked them again and again on their way out, about 17 us of CPU a fixed-answer test
(5% of it), for garbage that reference counting frees anyway. A cycle the run leaves behind
waits for at most that many objects more.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 10_000  # new container objects between two collections of the youngest generation


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze what exists now for the duration of the block, and collect the youngest generation
    every `YOUNG_THRESHOLD` objects meanwhile (unless the collector is off, or set to collect
    less often already). On leaving, the thresholds are put back (unless someone changed them
    meanwhile), and the frozen objects go back under the collector, unless something had frozen
    objects before (the CLI freezes its imports and loaded tests for the whole process; a run
    nested in another leaves the outer run's freeze and thresholds to it)."""
    owner = gc.get_freeze_count() == 0
    gc.freeze()
    before = gc.get_threshold()
    raised = 0 < before[0] < YOUNG_THRESHOLD
    if raised:
        gc.set_threshold(YOUNG_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        if raised and gc.get_threshold()[0] == YOUNG_THRESHOLD:
            gc.set_threshold(*before)
        if owner:
            gc.unfreeze()
