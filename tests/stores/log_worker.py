"""A process that writes to or reads from an S3 store's summary log, as one of several machines:

    python -m tests.stores.log_worker '<StoreSettings JSON>' writer <worker> <count>
    python -m tests.stores.log_worker '<StoreSettings JSON>' reader <writers> <count> <stop file>
    python -m tests.stores.log_worker '<StoreSettings JSON>' die-before-commit <test id> <score>
    python -m tests.stores.log_worker '<StoreSettings JSON>' die-before-result <test id> <score>

A writer puts its own keys and `count` shared keys every writer writes too, rewrites some with
put_many and deletes some; a reader reads every key's summary until the stop file exists (its
settings compact the log often, so compactions run among the writers). The die-* workers store
one result and are killed (os._exit) after the result is written and before its log chunk is
committed, or after the pending chunk and before the result. Prints "done" when it finishes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agent_health.config import Config
from agent_health.model import StoreSettings
from agent_health.stores import ResultKey, S3ResultStore, open_store
from tests.stores.results import make_result

AGENT, SUITE = "demo@v1", "race"


def all_keys(workers: int, count: int) -> list[ResultKey]:
    own = [f"own::w{w}-{i:03d}" for w in range(workers) for i in range(count)]
    return [ResultKey(AGENT, SUITE, t) for t in own + [f"shared::{i:03d}" for i in range(count)]]


def write(store: S3ResultStore, worker: int, count: int) -> None:
    for i in range(count):
        store.put(make_result(f"own::w{worker}-{i:03d}", suite=SUITE, score=float(worker)))
        store.put(make_result(f"shared::{i:03d}", suite=SUITE, score=float(worker), status="failed"))
        if i % 4 == 3:
            batch = [f"shared::{j:03d}" for j in range(i - 3, i)]
            store.put_many([make_result(t, suite=SUITE, score=float(worker) + 0.5) for t in batch])
        if i % 5 == 4:
            store.delete(ResultKey(AGENT, SUITE, f"shared::{i - 1:03d}"))


def read(store: S3ResultStore, workers: int, count: int, stop: Path) -> None:
    keys = all_keys(workers, count)
    while not stop.exists():
        for s in store.get_summaries(keys):
            assert s.suite == SUITE and s.score is not None, s


def die(store: S3ResultStore, test_id: str, score: float, when: str) -> None:
    """Store one result, killed at `when`: the second chunk write (the commit) or the result's."""
    bucket, writes = store.bucket, []
    real_write = bucket.write

    def write_then_maybe_die(key: str, data: bytes, **kw):  # type: ignore[no-untyped-def]
        writes.append(key)
        is_chunk = key.endswith(".jsonl")
        if when == "die-before-commit" and is_chunk and writes.count(key) == 2:
            os._exit(9)
        if when == "die-before-result" and key == store.object_key(ResultKey(AGENT, SUITE, test_id)):
            os._exit(9)
        return real_write(key, data, **kw)

    bucket.write = write_then_maybe_die  # type: ignore[method-assign]
    store.put(make_result(test_id, suite=SUITE, score=score))


def main() -> None:
    settings, role = StoreSettings.model_validate_json(sys.argv[1]), sys.argv[2]
    store = open_store(Config(root="."), settings)
    assert isinstance(store, S3ResultStore)
    if role == "writer":
        write(store, int(sys.argv[3]), int(sys.argv[4]))
    elif role == "reader":
        read(store, int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
    else:
        die(store, sys.argv[3], float(sys.argv[4]), role)
    print("done")


if __name__ == "__main__":
    main()
