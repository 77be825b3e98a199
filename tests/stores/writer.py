"""A worker process that writes results to a store, as one of several machines would:

    python -m tests.stores.writer '<StoreSettings JSON>' <project root> <worker> <count> <run id>

Each worker writes `count` results of its own and the same `count` shared keys every other worker
writes too (with its own content), all in one evaluation run; then prints "done"."""

from __future__ import annotations

import sys

from agent_health.config import Config
from agent_health.model import StoreSettings
from agent_health.stores import open_store
from tests.stores.results import make_result


def main() -> None:
    settings, root, worker, count, run_id = sys.argv[1:6]
    store = open_store(Config(root=root), StoreSettings.model_validate_json(settings))
    for i in range(int(count)):
        store.put(make_result(f"own::w{worker}-{i:03d}", suite="race", eval_run_id=run_id, score=float(worker)))
        store.put(make_result(f"shared::{i:03d}", suite="race", eval_run_id=run_id, score=float(worker)))
    print("done")


if __name__ == "__main__":
    main()
