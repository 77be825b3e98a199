"""The persistent, content-addressed judge cache: a SQLite file under the state folder by default,
or shared by every worker on the result store's S3 bucket or OpenSearch cluster.

SQLite is safe across processes of one machine: WAL journal (readers never block the writer), a
busy timeout instead of "database is locked" errors, and every write is one atomic upsert in
autocommit mode. The shared caches are safe across machines: a key is the hash of everything
that decides a verdict, so every writer of a key writes an equivalent value, and writes are
conditional (S3 If-None-Match, OpenSearch create): the first one stays, none is torn. Values are
JSON; a hit makes no provider call.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from agent_health.backends import is_shared
from agent_health.config.secrets import scrub_secrets
from agent_health.errors import ConfigError
from agent_health.model.settings import StoreSettings

CACHE_VERSION = 1
CACHE_FILE = "judge_cache.sqlite"


def cache_key(**parts: Any) -> str:
    """sha256 over the canonical JSON of `parts` (sorted keys) and the cache format version."""
    blob = json.dumps(
        {"cache_version": CACHE_VERSION, **parts},
        sort_keys=True,
        default=str,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _use_wal(db: sqlite3.Connection, timeout_s: float) -> None:
    """Switch to WAL once per file. The switch needs an exclusive lock and SQLite answers "database
    is locked" at once (no busy wait) while another process opens the same new file: retry."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


class JudgeCache:
    """key -> JSON value in a local SQLite file. Thread-safe; one connection per cache object.

    The shared caches below are JudgeCaches too (get, put, len, close, hits, misses), so every
    judge takes either one."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 30.0):
        self.path = Path(path)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            self._db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            _use_wal(self._db, busy_timeout_s)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS judge_cache (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
                "value TEXT NOT NULL, created_at REAL NOT NULL)"
            )
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(
                f"judge cache {self.path}: cannot open: {exc} "
                "(delete the file to reset the cache, or run with --no-cache)"
            ) from exc

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM judge_cache WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        try:
            value = json.loads(row[0])
        except ValueError:  # a torn or foreign value: treat as a miss, it will be overwritten
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, kind: str, value: dict[str, Any]) -> None:
        blob = json.dumps(scrub_secrets(value), default=str, ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT INTO judge_cache (key, kind, value, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET kind = excluded.kind, value = excluded.value, "
                "created_at = excluded.created_at",
                (key, kind, blob, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _entry(kind: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"cache_version": CACHE_VERSION, "kind": kind, "created_at": time.time(), "value": value}


class S3JudgeCache(JudgeCache):
    """The judge cache as objects `<prefix>/judge_cache/<key[:2]>/<key>.json` in the store's bucket."""

    def __init__(self, settings: dict[str, Any]):  # noqa: super().__init__ opens SQLite: not wanted here
        from agent_health.backends.s3 import S3Bucket

        self.bucket = S3Bucket(settings, "store.settings")
        self.path = Path(self.bucket.key("judge_cache"))
        self.hits = 0
        self.misses = 0

    def _key(self, key: str) -> str:
        return self.bucket.key("judge_cache", key[:2], f"{key}.json")

    def get(self, key: str) -> dict[str, Any] | None:
        data = self.bucket.get(self._key(key))
        try:
            value = json.loads(data)["value"] if data is not None else None
        except (ValueError, KeyError, TypeError):
            value = None  # a foreign object: a miss
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        return dict(value)

    def put(self, key: str, kind: str, value: dict[str, Any]) -> None:
        blob = json.dumps(_entry(kind, value), default=str, ensure_ascii=False).encode()
        self.bucket.put(self._key(key), blob, if_absent=True)  # another worker's equal verdict may be there

    def __len__(self) -> int:
        return sum(1 for _ in self.bucket.list(self.bucket.key("judge_cache") + "/"))

    def close(self) -> None:
        pass


JUDGE_CACHE_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "kind": {"type": "keyword"},
        "created_at": {"type": "double"},
        "value": {"type": "object", "enabled": False},
    },
}


class OpenSearchJudgeCache(JudgeCache):
    """The judge cache as documents (id = the key) in `<store index>-judge-cache`."""

    def __init__(self, settings: dict[str, Any]):  # noqa: super().__init__ opens SQLite: not wanted here
        from agent_health.backends.opensearch import OpenSearchIndex

        index = f"{settings.get('index', 'agent-health-results')}-judge-cache"
        self.index = OpenSearchIndex(settings, index, JUDGE_CACHE_MAPPING, "store.settings")
        self.path = Path(index)
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        doc = self.index.get(key, ["value"])
        if doc is None or not isinstance(doc.get("value"), dict):
            self.misses += 1
            return None
        self.hits += 1
        return dict(doc["value"])

    def put(self, key: str, kind: str, value: dict[str, Any]) -> None:
        self.index.put(key, json.loads(json.dumps(_entry(kind, value), default=str)), if_absent=True)

    def __len__(self) -> int:
        self.index.refresh()
        try:
            return int(self.index.ensure().count(index=self.index.index)["count"])
        except Exception as exc:
            raise self.index.fail("cannot count", exc) from exc

    def close(self) -> None:
        pass


def open_judge_cache(store: StoreSettings | None, local_path: str | Path) -> JudgeCache:
    """The judge cache of a run: on the store's backend when the store is shared (an s3 or
    opensearch store, unless its `shared` setting is false), else the SQLite file `local_path`."""
    if store is not None and is_shared(store):
        if store.type == "s3":
            return S3JudgeCache(dict(store.settings))
        if store.type == "opensearch":
            return OpenSearchJudgeCache(dict(store.settings))
    return JudgeCache(local_path)


__all__ = [
    "CACHE_FILE",
    "CACHE_VERSION",
    "JudgeCache",
    "OpenSearchJudgeCache",
    "S3JudgeCache",
    "cache_key",
    "open_judge_cache",
]
