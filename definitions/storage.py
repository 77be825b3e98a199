"""A SQLite event log for the local instance that keeps its database connections open and
writes event batches in one transaction.

Dagster's SqliteEventLogStorage builds a new engine and connection for every statement batch
(NullPool), several per event, and stores batches event by event; a run materializing 1,000
partitions writes 2,000 asset events (planned + materialized), so connection setup and commits
dominate. This subclass keeps one engine per shard with a small connection pool, and stores a
batch of asset events of one run in one transaction per shard. Dagster only batches when
$DAGSTER_EVENT_BATCH_SIZE is set; the `definitions` package sets a default. Select it in
`$DAGSTER_HOME/dagster.yaml` (the headless job writes this when the project is installed)::

    event_log_storage:
      module: definitions.storage
      class: PooledSqliteEventLogStorage
      config:
        base_dir: <DAGSTER_HOME>/history/runs/
"""

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster._core.events import ASSET_EVENTS
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlalchemy_compat import db_result
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import create_engine
from sqlalchemy.pool import QueuePool

_MAX_ENGINES = 16  # run shards come and go; keep the index shard and the recent runs


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """SqliteEventLogStorage with cached engines and pooled connections."""

    def __init__(self, base_dir: str, inst_data: Any = None):
        self._engines: OrderedDict[str, Any] = OrderedDict()  # before super(): its __init__ connects
        self._index_cols: bool | None = None
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "PooledSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Any:
        engine = self._engines.get(shard)
        if engine is None:
            engine = create_engine(
                self.conn_string_for_shard(shard),
                poolclass=QueuePool,
                pool_size=1,
                max_overflow=4,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
            )
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            self._engines[shard] = engine
            while len(self._engines) > _MAX_ENGINES:
                _, old = self._engines.popitem(last=False)
                old.dispose()
        else:
            self._engines.move_to_end(shard)
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Any]:
        with self._db_lock:
            engine = self._engine(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def store_event_batch(self, events: Any) -> None:
        """Asset events of one run: one transaction on the run shard and one on the index shard
        (the same rows store_event writes); any other event is stored on its own, in order."""
        events = list(events)
        batchable = [e for e in events if e.is_dagster_event and e.dagster_event_type in ASSET_EVENTS]
        if len(batchable) < 2 or len({e.run_id for e in batchable}) != 1:
            for event in events:
                self.store_event(event)
            return
        for event in events:
            if event not in batchable:
                self.store_event(event)
        statements = [self.prepare_insert_event(e) for e in batchable]
        with self.run_connection(batchable[0].run_id) as conn:
            for statement in statements:
                conn.execute(statement)
        with self.index_transaction() as conn:
            ids = []
            for statement in statements:
                with db_result(conn, statement) as result:
                    ids.append(result.inserted_primary_key[0])
            self._store_asset_event_tags(conn, batchable, ids)
            for event, event_id in zip(batchable, ids):
                self._store_asset_event(conn, event, event_id)

    def _has_asset_key_index_cols_on_connection(self, conn: Any) -> bool:
        # Asked once per asset event; the answer only changes with a schema migration.
        if self._index_cols is None:
            self._index_cols = super()._has_asset_key_index_cols_on_connection(conn)
        return self._index_cols

    def dispose(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()
        super().dispose()
