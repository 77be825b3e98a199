"""The persistent, content-addressed judge cache (a SQLite file under the state folder).

Safe across processes: WAL journal (readers never block the writer), a busy timeout instead of
"database is locked" errors, and every write is one atomic upsert in autocommit mode. Values are
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

from agent_health.config.secrets import scrub_secrets
from agent_health.errors import ConfigError

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
    """key -> JSON value. Thread-safe; one connection per cache object."""

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
