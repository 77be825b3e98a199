"""The persistent, content-addressed judge cache: a SQLite file under the state folder by default,
or shared by every worker on the result store's S3 bucket or OpenSearch cluster.

`JudgeCache` is the interface (and the contract all three keep); `LocalJudgeCache`,
`S3JudgeCache` and `OpenSearchJudgeCache` implement it side by side. A key is the hash of
everything that decides a verdict, so every writer of a key writes an equivalent value: every
cache keeps the first (SQLite insert-or-ignore, S3 If-None-Match, OpenSearch create), and none is
torn. Values are JSON; a hit makes no provider call.
"""

from __future__ import annotations

import abc
import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import agent_health.backends as backends
from agent_health.backends import is_shared
from agent_health.config.secrets import scrub_secrets
from agent_health.errors import ConfigError
from agent_health.files import safe_name
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
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        else:
            return


class JudgeCache(abc.ABC):
    """key -> JSON object, content-addressed: the interface every judge takes. Implementations:
    `LocalJudgeCache` (SQLite, the default), `S3JudgeCache` and `OpenSearchJudgeCache` (shared).

    The contract (tests/stores/test_judge_cache_contract.py runs it on all three): `get` gives the
    stored object or None (a miss; so is an unreadable or foreign entry), counting `hits` and
    `misses`; `put` scrubs known secrets from the value and keeps the first readable entry of a
    key (every writer of a key writes an equivalent verdict, so concurrent writers agree and none
    is torn), replacing only an unreadable one; any non-empty string is a key; entries outlive
    the object (a new one on the same place reads them). Thread-safe."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the entries live, for messages (never holds a secret)."""

    @abc.abstractmethod
    def _read(self, key: str) -> Any:
        """The value stored under `key` as decoded JSON; None when absent or unreadable."""

    @abc.abstractmethod
    def _write(self, key: str, kind: str, value: dict[str, Any], *, replace: bool) -> bool:
        """Store `value` whole; with `replace` False only when `key` has no entry (False: one is
        there and stays)."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """How many entries are stored."""

    def close(self) -> None:
        """Release connections (the shared caches hold none of their own)."""

    def get(self, key: str) -> dict[str, Any] | None:
        """The value stored under `key`, or None (a miss)."""
        value = self._read(_checked(key))
        if not isinstance(value, dict):  # absent, torn or foreign: a miss (the next put replaces it)
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, kind: str, value: dict[str, Any]) -> None:
        """Store `value` (secrets scrubbed) under `key` unless a readable entry is there already."""
        clean = json.loads(json.dumps(scrub_secrets(value), default=str, ensure_ascii=False))
        if not self._write(_checked(key), kind, clean, replace=False) and not isinstance(self._read(key), dict):
            self._write(key, kind, clean, replace=True)  # heal an unreadable entry


def _checked(key: str) -> str:
    if not isinstance(key, str) or not key:
        raise ValueError(f"judge cache key: expected a non-empty string, got {key!r}")
    return key


class LocalJudgeCache(JudgeCache):
    """The judge cache in a local SQLite file; one connection per cache object.

    SQLite is safe across processes of one machine: WAL journal (readers never block the writer),
    a busy timeout instead of "database is locked" errors, and every write is one atomic
    statement in autocommit mode."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 30.0):
        super().__init__()
        self.path = Path(path)
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

    @property
    def location(self) -> str:
        return str(self.path)

    def _read(self, key: str) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM judge_cache WHERE key = ?", (key,)).fetchone()
        try:
            return json.loads(row[0]) if row is not None else None
        except (TypeError, ValueError):
            return None

    def _write(self, key: str, kind: str, value: dict[str, Any], *, replace: bool) -> bool:
        blob = json.dumps(value, ensure_ascii=False)
        conflict = (
            "DO UPDATE SET kind = excluded.kind, value = excluded.value, created_at = excluded.created_at"
            if replace
            else "DO NOTHING"
        )
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO judge_cache (key, kind, value, created_at) VALUES (?, ?, ?, ?) "
                f"ON CONFLICT(key) {conflict}",
                (key, kind, blob, time.time()),
            )
            return cur.rowcount > 0

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _entry(kind: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"cache_version": CACHE_VERSION, "kind": kind, "created_at": time.time(), "value": value}


class S3JudgeCache(JudgeCache):
    """The judge cache as objects `<prefix>/judge_cache/<name[:2]>/<name>.json` in the store's
    bucket (`name`: the key, %-escaped where needed; see `agent_health.files.safe_name`).
    Conditional writes (If-None-Match) keep the first entry of a key across machines."""

    def __init__(self, settings: dict[str, Any]):
        super().__init__()
        self.bucket = backends.S3Bucket(settings, "store.settings")

    @property
    def location(self) -> str:
        return f"{self.bucket.location} judge_cache/"

    def _key(self, key: str) -> str:
        name = safe_name(key)
        return self.bucket.key("judge_cache", name[:2], f"{name}.json")

    def _read(self, key: str) -> Any:
        data = self.bucket.get(self._key(key))
        try:
            return json.loads(data)["value"] if data is not None else None
        except (ValueError, KeyError, TypeError):
            return None  # a foreign object: a miss

    def _write(self, key: str, kind: str, value: dict[str, Any], *, replace: bool) -> bool:
        blob = json.dumps(_entry(kind, value), ensure_ascii=False).encode()
        return self.bucket.put(self._key(key), blob, if_absent=not replace)

    def __len__(self) -> int:
        return sum(1 for _ in self.bucket.list(self.bucket.key("judge_cache") + "/"))


JUDGE_CACHE_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "kind": {"type": "keyword"},
        "created_at": {"type": "double"},
        "value": {"type": "object", "enabled": False},
    },
}


class OpenSearchJudgeCache(JudgeCache):
    """The judge cache as documents (id = the key; a digest past OpenSearch's 512 bytes) in
    `<store index>-judge-cache`. Create-only writes keep the first entry of a key across machines."""

    def __init__(self, settings: dict[str, Any]):
        super().__init__()
        index = f"{settings.get('index', 'agent-health-results')}-judge-cache"
        self.index = backends.OpenSearchIndex(settings, index, JUDGE_CACHE_MAPPING, "store.settings")

    @property
    def location(self) -> str:
        return self.index.location

    def _read(self, key: str) -> Any:
        doc = self.index.get(self.index.doc_id(key), ["value"])
        return None if doc is None else doc.get("value")

    def _write(self, key: str, kind: str, value: dict[str, Any], *, replace: bool) -> bool:
        return self.index.put(self.index.doc_id(key), _entry(kind, value), if_absent=not replace)

    def __len__(self) -> int:
        self.index.refresh()
        try:
            return int(self.index.ensure().count(index=self.index.index)["count"])
        except Exception as exc:
            raise self.index.fail("cannot count", exc) from exc


def open_judge_cache(store: StoreSettings | None, local_path: str | Path) -> JudgeCache:
    """The judge cache of a run: on the store's backend when the store is shared (an s3 or
    opensearch store, unless its `shared` setting is false), else the SQLite file `local_path`."""
    if store is not None and is_shared(store):
        if store.type == "s3":
            return S3JudgeCache(dict(store.settings))
        if store.type == "opensearch":
            return OpenSearchJudgeCache(dict(store.settings))
    return LocalJudgeCache(local_path)


__all__ = [
    "CACHE_FILE",
    "CACHE_VERSION",
    "JudgeCache",
    "LocalJudgeCache",
    "OpenSearchJudgeCache",
    "S3JudgeCache",
    "cache_key",
    "open_judge_cache",
]
