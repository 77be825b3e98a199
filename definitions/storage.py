"""A SQLite event log for the local instance that keeps its database connections open.

Dagster's SqliteEventLogStorage builds a new engine and connection for every statement batch
(NullPool), several per event; a run materializing 1,000 partitions writes 2,000 asset events,
so connection setup dominates. This subclass keeps one engine per shard with a small
connection pool. Select it in `$DAGSTER_HOME/dagster.yaml` (the headless job writes this)::

    event_log_storage:
      module: definitions.storage
      class: PooledSqliteEventLogStorage
      config:
        base_dir: <DAGSTER_HOME>/history/runs/
"""

from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator

from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import create_engine
from sqlalchemy.pool import QueuePool

_MAX_ENGINES = 16  # run shards come and go; keep the index shard and the recent runs


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """SqliteEventLogStorage with cached engines and pooled connections."""

    def __init__(self, base_dir: str, inst_data: Any = None):
        self._engines: "OrderedDict[str, Any]" = OrderedDict()  # before super(): its __init__ connects
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "PooledSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Any:
        engine = self._engines.get(shard)
        if engine is None:
            engine = create_engine(self.conn_string_for_shard(shard), poolclass=QueuePool, pool_size=1,
                                   max_overflow=4, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
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
            with engine.connect() as conn:
                with conn.begin():
                    yield conn

    def dispose(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()
        super().dispose()
