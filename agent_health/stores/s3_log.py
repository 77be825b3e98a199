"""The S3 store's summary log (the data and the ordering rule are in `stores/summary_log.py`).

Beside `results/<agent>/<suite>/`, every (agent version, suite) has a log folder:

    _summary_log/<agent>/<suite>/genesis.json           the log covers every result of the suite
    _summary_log/<agent>/<suite>/<ms>-<writer>-<n>.jsonl chunks

Writing a batch (one put, one put_many's results of one suite, a delete, or several puts that
arrive at once from a writer's threads: they are grouped, one batch in flight per suite):
1. a `pending` chunk naming the batch's tests, before any result is written: a writer that
   dies later leaves it behind, and readers read those tests' result objects themselves;
2. the result objects (and their run-history copies) in parallel, or the deletes;
3. the same chunk again, `committed`: each test's ETag and summary (or that it was deleted).
A writer also merges its last 16 small chunks of a suite into one, then removes them.

Reading: list the log folder (a few objects), read every chunk, keep each test's current entry
(`summary_log.current`), and read the result objects of the tests the log cannot vouch for (in
a pending chunk, a failed write, or written by two machines within a few seconds of each other).
A reader that found many chunks, or a pending chunk older than the lease (its writer is dead),
writes one `compact` chunk with the current entry of every test (deletions included) and only
then removes the chunks it covers (never a young pending one); concurrent compactions each cover
what they read, and a chunk that vanished under a reader makes it read the folder again.

Without `genesis.json` (results written before this log existed) a reader lists the result
objects once, reads those the log does not know (by ETag), and compacts: the next read trusts
the log. A writer creates `genesis.json` when it is the first to write to an empty suite.

Settings (`store.settings`): `log_skew_s` (1: how far apart the server's own clocks may be),
`log_lease_s` (900: a pending chunk older than this is a dead writer's; it must exceed by far the
longest a write may take, `timeout_s` x `max_attempts`), `log_compact_at` (32 chunks).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote

from agent_health.backends.s3 import ObjectRead, S3Bucket, number_setting
from agent_health.errors import StoreError
from agent_health.stores.summary import ResultSummary
from agent_health.stores.summary_log import (
    Chunk,
    Entry,
    ceil_s,
    current,
    entry_line,
    floor_s,
    header_line,
    observed,
    observed_absent,
    parse_chunk,
)

LOG = "_summary_log"
GENESIS = "genesis.json"
MERGE_AT = 16  # a writer's small chunks of one suite merged into one
MERGE_SMALL = 64  # entries: larger chunks are left as they are
_READ_ATTEMPTS = 4
logger = logging.getLogger("agent_health.stores")


@dataclass(frozen=True, slots=True)
class Write:
    """One test's write in a batch: its result object and run-history copies, or a delete."""

    test_id: str
    objects: tuple[tuple[str, bytes], ...]  # (key, bytes): the result object first; empty: a delete
    summary: ResultSummary | None


@dataclass(frozen=True, slots=True)
class LogSettings:
    skew_s: float = 1.0
    lease_s: float = 900.0
    compact_at: int = 32

    @classmethod
    def of(cls, settings: Mapping[str, Any], setting: str) -> LogSettings:
        skew_s = number_setting(settings, "log_skew_s", 1.0, setting)
        lease_s = number_setting(settings, "log_lease_s", 900.0, setting)
        compact_at = number_setting(settings, "log_compact_at", 32, setting, minimum=1, whole=True)
        return cls(skew_s, lease_s, int(compact_at))


@dataclass
class _Ticket:
    writes: list[Write]
    errors: list[Exception | None] = field(default_factory=list)
    done: bool = False


@dataclass
class _Loaded:
    """A suite's log as one read found it."""

    chunks: list[Chunk]
    genesis: bool
    now: float  # the server's clock after the listing
    unreadable: list[str] = field(default_factory=list)
    entries: dict[str, list[Entry]] = field(default_factory=dict)
    doubt: set[str] = field(default_factory=set)
    old_pending: set[str] = field(default_factory=set)


class SummaryLog:
    """The summary logs of one S3 store: `writer(agent, suite)` writes, `read` reads."""

    def __init__(
        self,
        bucket: S3Bucket,
        object_key: Callable[[str, str, str], str],
        results_folder: Callable[[str, str], str],
        folder: Callable[[str, str], str],
        parse_summary: Callable[[str, bytes], ResultSummary],
        settings: LogSettings,
    ):
        self.bucket = bucket
        self.object_key = object_key
        self.results_folder = results_folder
        self.folder = folder
        self.parse_summary = parse_summary
        self.settings = settings
        self.writer_id = uuid.uuid4().hex[:12]  # one per store instance: its batches never overlap
        self._batches = itertools.count(1)
        self._writers: dict[tuple[str, str], _GroupWriter] = {}
        self._lock = threading.Lock()

    def chunk_name(self, agent: str, suite: str, batch: int) -> str:
        return f"{self.folder(agent, suite)}{int(time.time() * 1000):013d}-{self.writer_id}-{batch:08d}.jsonl"

    def next_batch(self) -> int:
        return next(self._batches)

    # -- writing -------------------------------------------------------------------------------
    def write(self, agent: str, suite: str, writes: list[Write]) -> list[Exception | None]:
        """Write `writes` (one suite's) as one batch, or with others in flight; per write, the
        error that stopped it (None: stored and logged)."""
        with self._lock:
            group = self._writers.get((agent, suite))
            if group is None:
                group = self._writers[(agent, suite)] = _GroupWriter(self, agent, suite)
        return group.write(writes)

    # -- reading -------------------------------------------------------------------------------
    def read(self, agent: str, suite: str, wanted: Collection[str] | None = None) -> dict[str, ResultSummary]:
        """Summaries of the suite's stored results (of `wanted` tests only, when given), by test id."""
        loaded = self._load(agent, suite)
        trusted = loaded.genesis and not loaded.unreadable
        compact = self._should_compact(loaded)
        resolved: dict[str, Entry] = {}
        if not trusted:
            resolved = self._reconcile(agent, suite, loaded)
        else:
            if wanted is None or compact:
                targets: Collection[str] = loaded.entries.keys() | loaded.doubt
            else:
                targets = wanted
            unsure: list[str] = []
            for test_id in targets:
                if test_id in loaded.doubt:
                    unsure.append(test_id)
                    continue
                entries = loaded.entries.get(test_id)
                if not entries:
                    continue  # not stored
                entry = current(entries, self.settings.skew_s)
                if entry is None:
                    unsure.append(test_id)
                else:
                    resolved[test_id] = entry
            resolved.update(self._verify(agent, suite, unsure))
        if compact:
            self._compact(agent, suite, loaded, resolved)
        chosen = resolved if wanted is None else {t: resolved[t] for t in wanted if t in resolved}
        return {t: e.summary for t, e in chosen.items() if e.summary is not None}

    def _load(self, agent: str, suite: str) -> _Loaded:
        folder = self.folder(agent, suite)
        for _ in range(_READ_ATTEMPTS):
            listing = self.bucket.listing(folder)
            names = [o.key for o in listing.objects if o.key.endswith(".jsonl")]
            reads = self.bucket.read_many(names)
            if all(r.data is not None for r in reads):
                break  # else a compaction or merge removed a chunk since the listing: list again
        loaded = _Loaded([], any(o.key == folder + GENESIS for o in listing.objects), listing.last_time)
        for r in reads:
            if r.data is None:
                loaded.unreadable.append(f"{r.key}: removed while being read")
                continue
            try:
                chunk = parse_chunk(r.key, r.data, r.modified)
            except ValueError as exc:
                loaded.unreadable.append(str(exc))
                continue
            loaded.chunks.append(chunk)
            loaded.doubt.update(chunk.header.doubt)
            if chunk.header.kind == "pending" and chunk.modified + self.settings.lease_s <= loaded.now:
                loaded.old_pending.add(chunk.name)
            for entry in chunk.entries:
                loaded.entries.setdefault(entry.test_id, []).append(entry)
        if loaded.unreadable:
            logger.warning(
                "result store %s: the summary log of %s / %s has chunks this version cannot use (%s); "
                "read the results themselves instead",
                self.bucket.location,
                agent,
                suite,
                "; ".join(loaded.unreadable),
            )
        return loaded

    def _should_compact(self, loaded: _Loaded) -> bool:
        return not loaded.genesis or len(loaded.chunks) > self.settings.compact_at or bool(loaded.old_pending)

    def _verify(self, agent: str, suite: str, test_ids: list[str]) -> dict[str, Entry]:
        """The current state of each test's result object, read from the object itself."""
        out: dict[str, Entry] = {}
        keys = [self.object_key(agent, suite, t) for t in test_ids]
        for test_id, found in zip(test_ids, self.bucket.read_many(keys)):
            out[test_id] = self._observed(test_id, found)
        return out

    def _observed(self, test_id: str, found: ObjectRead) -> Entry:
        if found.data is None:
            return observed_absent(test_id, found.server_time, found.server_time)
        return observed(test_id, found.etag, self.parse_summary(found.key, found.data), found.modified)

    def _reconcile(self, agent: str, suite: str, loaded: _Loaded) -> dict[str, Entry]:
        """The suite's results from a listing of the result objects (listed after the log, so
        it reflects every chunk read), with the summaries the log has for their ETags."""
        folder = self.results_folder(agent, suite)
        listing = self.bucket.listing(folder)
        known = {(e.test_id, e.etag): e.summary for es in loaded.entries.values() for e in es if e.summary}
        out: dict[str, Entry] = {}
        unknown: list[str] = []
        for o in listing.objects:
            test_id = self._test_id(folder, o.key)
            if test_id is None:
                continue
            summary = known.get((test_id, o.etag))
            if summary is not None:
                out[test_id] = observed(test_id, o.etag, summary, o.modified)
            else:
                unknown.append(test_id)
        out.update(self._verify(agent, suite, unknown))
        for test_id in loaded.entries.keys() | loaded.doubt:
            if test_id not in out:
                out[test_id] = observed_absent(test_id, listing.first_time, listing.last_time)
        return out

    def _test_id(self, folder: str, key: str) -> str | None:
        leaf = key[len(folder) :]
        if "/" in leaf or not leaf.endswith(".json"):
            return None
        return unquote(leaf[: -len(".json")])

    def _compact(self, agent: str, suite: str, loaded: _Loaded, resolved: dict[str, Entry]) -> None:
        """One chunk with every test's current entry, then the chunks it covers removed."""
        covered = [c.name for c in loaded.chunks if c.header.kind != "pending" or c.name in loaded.old_pending]
        if loaded.genesis and len(covered) <= 1 and not loaded.old_pending:
            return
        body = [header_line("compact", writer=self.writer_id)]
        body += [entry_line(resolved[t], timed=True) for t in sorted(resolved)]
        try:
            if self.bucket.write(self.chunk_name(agent, suite, self.next_batch()), b"".join(body), if_absent=True):
                self.bucket.remove_many(covered)
                if not loaded.genesis and not loaded.unreadable:
                    self.bucket.write(self.folder(agent, suite) + GENESIS, b'{"format":1}', if_absent=True)
        except StoreError as exc:  # read-only credentials still read; the next reader compacts
            where = f"{self.bucket.location}: the summary log of {agent} / {suite}"
            logger.info("result store %s not compacted: %s", where, exc)


class _GroupWriter:
    """One suite's writes from one store: batches one at a time; what arrives meanwhile waits
    and goes in the next batch (so a writer's threads share chunks)."""

    def __init__(self, log: SummaryLog, agent: str, suite: str):
        self.log = log
        self.agent = agent
        self.suite = suite
        self._cond = threading.Condition()
        self._queue: list[_Ticket] = []
        self._busy = False
        self._genesis_checked = False
        self._small: list[tuple[str, list[Entry]]] = []  # committed small chunks, not merged yet

    def write(self, writes: list[Write]) -> list[Exception | None]:
        ticket = _Ticket(writes)
        with self._cond:
            self._queue.append(ticket)
            while self._busy and not ticket.done:
                self._cond.wait()
            if ticket.done:
                return ticket.errors
            self._busy = True
            batch, self._queue = self._queue, []
        flat = [w for t in batch for w in t.writes]
        errors: list[Exception | None] = [StoreError("the write was interrupted")] * len(flat)
        try:
            errors = self._flush(flat)
        except Exception as exc:  # handed to every writer waiting on the batch  # noqa: BLE001
            errors = [exc] * len(flat)
        finally:
            with self._cond:
                i = 0
                for t in batch:
                    t.errors, t.done = errors[i : i + len(t.writes)], True
                    i += len(t.writes)
                self._busy = False
                self._cond.notify_all()
        return ticket.errors

    def _ensure_genesis(self) -> None:
        """Mark an empty suite's log as covering everything (a suite with results from before
        the log is left to the first reader, which reconciles it)."""
        if self._genesis_checked:
            return
        bucket, name = self.log.bucket, self.log.folder(self.agent, self.suite) + GENESIS
        if not bucket.exists(name) and not bucket.has_any(self.log.results_folder(self.agent, self.suite)):
            bucket.write(name, b'{"format":1}', if_absent=True)
        self._genesis_checked = True

    def _flush(self, writes: list[Write]) -> list[Exception | None]:
        log, bucket = self.log, self.log.bucket
        self._ensure_genesis()
        last = {w.test_id: i for i, w in enumerate(writes)}  # a test written twice: the last one wins
        doubt = list(last)
        batch = log.next_batch()
        name = log.chunk_name(self.agent, self.suite, batch)
        pending = bucket.write(
            name, header_line("pending", writer=log.writer_id, batch=batch, doubt=doubt), if_absent=True
        )
        if pending is None:
            raise StoreError(f"{bucket.location}: summary log chunk {name} exists already")
        began = floor_s(pending.server_time)

        jobs: list[tuple[int, str, bytes | None]] = []
        for i, w in enumerate(writes):
            objects = w.objects if last[w.test_id] == i else w.objects[1:]  # superseded: run copies only
            if not w.objects and last[w.test_id] == i:
                jobs.append((i, self.log.object_key(self.agent, self.suite, w.test_id), None))
            jobs.extend((i, key, data) for key, data in objects)

        def run(job: tuple[int, str, bytes | None]) -> str:
            _, key, data = job
            if data is None:
                bucket.remove(key)
                return ""
            written = bucket.write(key, data)
            return written.etag if written is not None else ""

        errors: list[Exception | None] = [None] * len(writes)
        etags: dict[int, str] = {}
        for (i, key, _), outcome in zip(jobs, bucket.parallel(run, jobs)):
            if isinstance(outcome, Exception):
                errors[i] = errors[i] or outcome
            elif writes[i].objects and key == writes[i].objects[0][0]:
                etags[i] = outcome
        for i, w in enumerate(writes):  # a superseded write is stored when the one that replaced it is
            errors[i] = errors[i] or errors[last[w.test_id]]
        entries = [
            Entry(w.test_id, etags[i] if w.objects else None, w.summary, began, began, log.writer_id, batch)
            for i, w in enumerate(writes)
            if last[w.test_id] == i and errors[i] is None
        ]
        failed = [w.test_id for i, w in enumerate(writes) if last[w.test_id] == i and errors[i] is not None]
        body = [header_line("committed", writer=log.writer_id, batch=batch, began=began, doubt=failed)]
        body += [entry_line(e, timed=False) for e in entries]
        try:
            committed = bucket.write(name, b"".join(body))
        except StoreError as exc:  # the results are stored: readers verify the pending chunk's tests
            logger.warning("result store %s: summary log chunk %s left pending: %s", bucket.location, name, exc)
            return errors
        if committed is not None and not failed and len(entries) <= MERGE_SMALL:
            ended = ceil_s(committed.server_time)
            self._small.append((name, [replace(e, ended=ended) for e in entries]))
            if len(self._small) >= MERGE_AT:
                self._merge()
        return errors

    def _merge(self) -> None:
        """This writer's small chunks of the suite as one (a later batch's entry of a test
        replaces an earlier one: one writer's batches never overlap), then the small ones removed."""
        log, bucket = self.log, self.log.bucket
        small, self._small = self._small, []
        latest = {e.test_id: e for _, entries in small for e in entries}
        body = [header_line("merged", writer=log.writer_id)]
        body += [entry_line(e, timed=True) for e in latest.values()]
        try:
            if bucket.write(log.chunk_name(self.agent, self.suite, log.next_batch()), b"".join(body), if_absent=True):
                bucket.remove_many(name for name, _ in small)
        except StoreError as exc:  # the small chunks stay: readers read them, a compaction merges them
            logger.info("result store %s: summary log chunks not merged: %s", bucket.location, exc)
