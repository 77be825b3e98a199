"""A process that rewrites the same results in batches until it is killed or its time is up:

    python -m tests.engine.store_writer <store root> <run id> <seconds> [new] [small]

Each batch rewrites every key with a new round number and large content (a write of one result
takes many pages, so a non-atomic write would be seen half done); with `new`, each batch writes
new keys instead; with `small`, the content is small (many more batches a second). After each
`put_many` returns it prints the round, so a reader of its output knows which round is stored."""

from __future__ import annotations

import sys
import time

from agent_health.stores import LocalResultStore
from tests.stores.results import make_result

KEYS = 20
BIG = "x" * 200_000


def batch(round_: int, run_id: str, new: bool = False, big: bool = True) -> list:
    name = f"race::r{round_:04d}-t{{:02d}}" if new else "race::t{:02d}"
    error = f"{round_}:{BIG if big else 'x'}"
    return [
        make_result(name.format(i), suite="race", eval_run_id=run_id, error=error, score=i / KEYS) for i in range(KEYS)
    ]


def main() -> None:
    root, run_id, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    new, big = "new" in sys.argv[4:], "small" not in sys.argv[4:]
    store = LocalResultStore(root)
    deadline = time.monotonic() + seconds
    round_ = 0
    while time.monotonic() < deadline:
        store.put_many(batch(round_, run_id, new, big))
        print(round_, flush=True)
        round_ += 1


if __name__ == "__main__":
    main()
