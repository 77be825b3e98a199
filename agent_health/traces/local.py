"""The embedded span store: OpenTelemetry spans as JSON lines under `<state>/spans/`. No server.

Layout: any `*.jsonl` file in the folder holds spans, one span dict per line (see
`agent_health.traces.spans`) or a JSON array of them (one run's batch); `*.logs.jsonl` files hold
log records the same way. This process appends to its
own pair of files (`<pid>-<start>-<n>.jsonl`, `<pid>-<start>-<n>.logs.jsonl`), so a run costs a
buffered append, not a new file (lines reach the file within 10 ms, written by a background thread,
and before this process reads the folder); other writers (an agent exporting spans as JSON lines) may add their own
files. Readers index the folder incrementally: a look parses only the bytes added since the last
one. What this process wrote is not indexed as it is written: the last few hundred lines stay in
memory (a run's spans are read back from there right after the run, the demo agent's case), and
its files are indexed like any other's on the first look that misses.

The index keeps where each trace's and run's lines are (file, offset, length, packed in one int),
not the records: about 360 bytes a run (a demo-agent run's spans and logs lines, by trace id and
by run id) once indexed, and a look reads and parses only the lines it needs. A run whose spans
are only ever read from memory costs the index nothing, so a 50,000-test demo run holds no index.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from agent_health.files import append_whole
from agent_health.traces import dsl
from agent_health.traces.source import Fetched, RunRef, TraceSource, best_trace_in_window
from agent_health.traces.spans import HARNESS_SERVICES, RUN_ID_ATTRIBUTES, is_harness

_dumps = json.JSONEncoder(default=str, separators=(",", ":")).encode
_LOCK = threading.Lock()
_WRITERS: dict[str, _Writer] = {}
_INDEXES: dict[str, _Index] = {}

Where = tuple[str, int, int]  # file, offset, length of one line
_RECENT_LINES = 512  # lines this process wrote that stay in memory (a few hundred runs' worth)
_OFFSET_BITS, _LENGTH_BITS = 48, 40  # a packed line: file number, offset (< 256 TB), length (< 1 TB)
_HEX32 = re.compile(r"[0-9a-f]{32}")
_FLUSH_S = 0.01  # how long a written line may wait in memory before it reaches its file
_GONE_BITS = 1 << 23  # a 1 MB Bloom filter of the keys whose lines left memory (`_Index.gone`)


def _records(line: bytes) -> list[Any]:
    try:
        rec = json.loads(line)
    except ValueError:
        return []
    return rec if isinstance(rec, list) else [rec]


def _run_id(rec: dict[str, Any]) -> str | None:
    attrs = rec.get("attributes")
    if not isinstance(attrs, dict):  # malformed: indexed by trace id only
        return None
    for key in RUN_ID_ATTRIBUTES:
        if attrs.get(key) is not None:
            return str(attrs[key])
    return None


@functools.lru_cache(maxsize=4096)
def _key(text: str) -> str | int:
    """An index key: a 32-digit lowercase hex id (OpenTelemetry's trace ids, the harness's run
    ids) as its number, 44 bytes instead of 81; any other text as it is. Only ids of exactly that
    form become numbers, so two different ids never share a key. Cached, so a run's spans line
    and logs line, indexed one after the other, share one number."""
    return int(text, 16) if len(text) == 32 and _HEX32.fullmatch(text) else text


def _keys(records: Iterable[Any]) -> tuple[set[str], set[str]]:
    """The trace ids and run ids of one line's records."""
    traces: set[str] = set()
    runs: set[str] = set()
    for rec in records:
        if not isinstance(rec, dict):
            continue
        traces.add(str(rec.get("trace_id")))
        run_id = _run_id(rec)
        if run_id is not None:
            runs.add(run_id)
    return traces, runs


def _matching(kind: str, key: str, lines: Iterable[list[Any]]) -> list[dict[str, Any]]:
    """The records of `key` in `lines` (each line's records)."""
    field = "trace_id" if kind in ("spans", "logs") else None
    out: list[dict[str, Any]] = []
    for records in lines:
        for rec in records:
            if isinstance(rec, dict) and (str(rec.get(field)) if field else _run_id(rec)) == key:
                out.append(rec)
    return out


class _Index:
    """Where the records of every file in one folder are, by trace id and run id, read
    incrementally."""

    def __init__(self, root: Path):
        self.root = root
        self.offsets: dict[str, int] = {}
        # the records of the lines this process wrote last (and their keys, by kind), so a run's
        # spans are read back right after the run without file I/O, parsing or an index entry;
        # bounded, so memory stays flat
        self.recent: OrderedDict[Where, tuple[list[Any], list[tuple[str, str | int]]]] = OrderedDict()
        self.recent_keys: dict[tuple[str, str | int], list[Where]] = {}  # (kind, key) -> its lines in `recent`
        # the (kind, key) pairs that had a line leave `recent`, as a Bloom filter: a key in it may have
        # lines that are neither in memory nor indexed yet, so it is read from the files (a false
        # positive only costs that read); fixed size, so memory stays flat
        self.gone = bytearray(_GONE_BITS // 8)
        # kind ("spans", "logs", "spans_by_run", "logs_by_run") -> key -> the lines holding its
        # records, each packed into one int (`_pack`), one int alone when there is one line (a
        # run's batch, nearly always): about 200 bytes a run less than lists of tuples
        self.lines: dict[str, dict[str | int, int | list[int]]] = {
            "spans": {},
            "logs": {},
            "spans_by_run": {},
            "logs_by_run": {},
        }
        self.files: list[str] = []  # the file of a packed line, by number
        self.file_no: dict[str, int] = {}

    def _pack(self, where: Where) -> int:
        path, offset, length = where
        no = self.file_no.get(path)
        if no is None:
            no = self.file_no[path] = len(self.files)
            self.files.append(path)
        return (((no << _OFFSET_BITS) | offset) << _LENGTH_BITS) | length

    def _unpack(self, packed: int) -> Where:
        offset = (packed >> _LENGTH_BITS) & ((1 << _OFFSET_BITS) - 1)
        return self.files[packed >> (_OFFSET_BITS + _LENGTH_BITS)], offset, packed & ((1 << _LENGTH_BITS) - 1)

    def has(self, kind: str, key: str) -> bool:
        return _key(key) in self.lines[kind]

    def _lines(self, kind: str, key: str) -> list[Where]:
        found = self.lines[kind].get(_key(key))
        if found is None:
            return []
        return [self._unpack(p) for p in (found if isinstance(found, list) else (found,))]

    def add(self, where: Where, records: Iterable[Any], logs: bool) -> None:
        traces, runs = _keys(records)
        if not traces and not runs:
            return
        packed = self._pack(where)
        by_trace = self.lines["logs" if logs else "spans"]
        by_run = self.lines["logs_by_run" if logs else "spans_by_run"]
        for table, keys in ((by_trace, traces), (by_run, runs)):
            for text in keys:  # a batch line is listed once per key it holds
                key = _key(text)
                found = table.get(key)
                if found is None:
                    table[key] = packed
                elif isinstance(found, list):
                    found.append(packed)
                else:
                    table[key] = [found, packed]

    def refresh(self) -> None:
        try:
            entries = [e for e in os.scandir(self.root) if e.name.endswith(".jsonl")]
        except FileNotFoundError:
            return
        for entry in entries:  # this process's files too: their lines are indexed here, on a miss
            try:
                size = entry.stat().st_size
            except FileNotFoundError:
                continue
            offset = self.offsets.get(entry.path, 0)
            if size < offset:  # replaced by a shorter file: read it again from the start
                offset = 0
            if size <= offset:
                continue
            with open(entry.path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read(size - offset)
            end = chunk.rfind(b"\n") + 1  # a line being written right now is read next time, whole
            self.offsets[entry.path] = offset + end
            logs = entry.name.endswith(".logs.jsonl")
            pos = offset
            for line in chunk[:end].split(b"\n")[:-1]:
                self.add((entry.path, pos, len(line)), _records(line), logs)
                pos += len(line) + 1

    def where(self, kind: str, key: str) -> list[Where]:
        return self._lines(kind, key)

    @staticmethod
    def _bits(pair: tuple[str, str | int]) -> Iterator[int]:
        first, second = hash(pair), hash((pair[1], pair[0]))
        return ((first + i * second) % _GONE_BITS for i in range(6))  # 6 bits: about 1e-7 false hits at 100,000 keys

    def remember(self, where: Where, records: list[Any], logs: bool) -> None:
        """Keep one line this process wrote in memory, and forget the oldest past `_RECENT_LINES`."""
        traces, runs = _keys(records)
        pairs = [("logs" if logs else "spans", _key(t)) for t in traces]
        pairs += [("logs_by_run" if logs else "spans_by_run", _key(r)) for r in runs]
        self.recent[where] = (records, pairs)
        for pair in pairs:
            self.recent_keys.setdefault(pair, []).append(where)
        if len(self.recent) > _RECENT_LINES:
            for pair in self.forget(next(iter(self.recent))):
                for bit in self._bits(pair):
                    self.gone[bit >> 3] |= 1 << (bit & 7)

    def forget(self, where: Where) -> list[tuple[str, str | int]]:
        """Drop one line from memory; its (kind, key) pairs."""
        _, pairs = self.recent.pop(where, (None, []))
        for pair in pairs:
            held = self.recent_keys.get(pair)
            if held is not None:
                held.remove(where)
                if not held:
                    del self.recent_keys[pair]
        return pairs

    def _gone(self, pair: tuple[str, str | int]) -> bool:
        return all(self.gone[bit >> 3] & (1 << (bit & 7)) for bit in self._bits(pair))

    def stale(self, kind: str, key: str) -> bool:
        """Whether this process may have written lines of `key` the index has not read yet."""
        pair = (kind, _key(key))
        held = self.recent_keys.get(pair, ())
        return any(offset >= self.offsets.get(name, 0) for name, offset, _ in held) or self._gone(pair)

    def cached(self, kind: str, key: str) -> list[dict[str, Any]] | None:
        """The records of `key` when every line holding them is in memory, else None."""
        pair = (kind, _key(key))
        lines = self.recent_keys.get(pair)
        if not lines or any(w not in self.recent for w in self._lines(kind, key)):
            return None  # not in memory, or also in lines only the files have
        if self._gone(pair):
            return None  # an older line of it may have left memory unindexed
        return _matching(kind, key, (self.recent[w][0] for w in lines))

    @staticmethod
    def read(kind: str, key: str, lines: Iterable[Where]) -> list[dict[str, Any]]:
        """The records of `key` (a trace id, or a run id for the `*_by_run` kinds) in `lines`."""

        def parsed() -> Iterator[list[Any]]:
            for path, offset, length in lines:
                try:
                    with open(path, "rb") as fh:
                        fh.seek(offset)
                        yield _records(fh.read(length))
                except FileNotFoundError:  # the folder was cleaned meanwhile
                    continue

        return _matching(kind, key, parsed())

    def all_records(self, logs: bool = False) -> Iterator[dict[str, Any]]:
        """Every record in the folder (the time-window fallback and custom run id attributes)."""
        for path in list(self.offsets):
            if path.endswith(".logs.jsonl") != logs:
                continue
            try:
                with open(path, "rb") as fh:
                    chunk = fh.read(self.offsets[path])
            except FileNotFoundError:
                continue
            for line in chunk.splitlines():
                yield from (r for r in _records(line) if isinstance(r, dict))


class _Writer:
    """This process's append-only files in one folder; what it writes stays in memory a while
    (`_Index.remember`), is indexed on the first look that misses, and reaches the file within
    `_FLUSH_S` (from the flusher thread, or before any read of the
    folder), so a writer on an event loop (the demo agent) makes no system call per run. File I/O
    never happens under `_LOCK`: a lock held across a system call stalls every thread that wants it
    while the holder waits for the GIL."""

    def __init__(self, root: Path, index: _Index):
        self.root = root
        self.index = index
        self.pid = -1
        self.stem = ""
        self.files: dict[str, BinaryIO] = {}
        self.sizes: dict[str, int] = {}  # bytes written or pending, per file
        self.flushed: dict[str, int] = {}  # bytes on disk, per file
        self.pending: list[tuple[str, str, bytes, list[Any]]] = []  # kind, file, line, its records
        self.io_lock = threading.Lock()  # one flush at a time, in order

    def _open(self, kind: str) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        suffix = ".logs.jsonl" if kind == "logs" else ".jsonl"
        # kept open across writes (closed by reset()): one append stream per process
        fh = self.files[kind] = open(self.root / f"{self.stem}{suffix}", "ab", buffering=0)  # noqa: SIM115
        self.sizes[fh.name] = self.flushed[fh.name] = os.fstat(fh.fileno()).st_size
        self.index.offsets.setdefault(fh.name, 0)
        return str(fh.name)  # opened by path, so the name is that path

    def _file(self, kind: str) -> str:
        fh = self.files.get(kind)
        return fh.name if fh is not None and not fh.closed else self._open(kind)

    def write(self, kind: str, records: list[dict[str, Any]]) -> None:
        """Index one batch and queue it for its file (call with _LOCK held)."""
        if not records:
            return
        data = (_dumps(records) + "\n").encode()  # one line per batch: one encode, one parse
        if self.pid != os.getpid():  # first write, or a forked child: its own files
            self.pid, self.files, self.pending = os.getpid(), {}, []
            self.stem = f"{self.pid}-{int(time.time() * 1000)}-{next(_STEMS)}"
        name = self._file(kind)
        self._index(kind, name, data, records)
        self.pending.append((kind, name, data, records))
        _FLUSHER.wake()

    def _index(self, kind: str, name: str, data: bytes, records: list[Any]) -> None:
        """Keep the line in memory where it will be in its file (indexed from the file on a miss)."""
        before = self.sizes[name]
        self.sizes[name] = before + len(data)
        self.index.remember((name, before, len(data) - 1), records, kind == "logs")

    def _reopen(self, batch: list[tuple[str, str, bytes, list[Any]]]) -> list[tuple[str, str, bytes, list[Any]]]:
        """The folder was cleaned meanwhile: new files, and every line not on disk yet (this
        batch and what was written since) kept in memory at their new place (call with _LOCK held)."""
        for fh in self.files.values():
            fh.close()
            self.flushed[fh.name] = self.sizes[fh.name]  # nothing more will reach it: stop waiting
        self.files = {}
        self.stem = f"{self.pid}-{int(time.time() * 1000)}-{next(_STEMS)}"
        moved = []
        end = dict(self.sizes)  # these lines are the last of their files: forget them at their old place
        for _, name, data, _ in reversed(batch + self.pending):
            end[name] -= len(data)
            self.index.forget((name, end[name], len(data) - 1))
        for kind, _, data, records in batch + self.pending:
            name = self._file(kind)
            self._index(kind, name, data, records)
            moved.append((kind, name, data, records))
        self.pending = moved[len(batch) :]
        return moved[: len(batch)]

    def flush(self) -> None:
        """Write what is pending, in order (call without _LOCK held)."""
        with self.io_lock:
            with _LOCK:
                if not self.pending or self.pid != os.getpid():
                    return
                batch, self.pending = self.pending, []
                files = {fh.name: fh for fh in self.files.values()}
            if any(name not in files or os.fstat(files[name].fileno()).st_nlink == 0 for _, name, _, _ in batch):
                with _LOCK:
                    batch = self._reopen(batch)
                    files = {fh.name: fh for fh in self.files.values()}
            done: set[str] = set()
            try:
                for name in dict.fromkeys(name for _, name, _, _ in batch):
                    chunk = b"".join(data for _, n, data, _ in batch if n == name)
                    append_whole(files[name].fileno(), chunk)  # whole lines, so other processes see them
                    self.flushed[name] = self.flushed.get(name, 0) + len(chunk)
                    done.add(name)
            except OSError as exc:  # a full disk: no torn line stays; the lines wait for the next flush
                with _LOCK:
                    self.pending = [item for item in batch if item[1] not in done] + self.pending
                _report_write_error(self.root, exc)

    def on_disk(self, lines: Iterable[Where]) -> bool:
        return all(offset + length < self.flushed.get(name, 1 << 62) for name, offset, length in lines)


_REPORTED: set[Path] = set()  # span folders whose write error was reported already


def _report_write_error(root: Path, exc: OSError) -> None:
    """Say once per folder that spans cannot be written (a log record, never a traceback)."""
    if root in _REPORTED:
        return
    _REPORTED.add(root)
    logging.getLogger("agent_health.traces").error(
        "error: cannot write spans under %s: %s; the traces of the runs since are incomplete",
        root,
        exc.strerror or exc,
    )


class _Flusher:
    """One daemon thread that writes every writer's pending lines soon after they were written."""

    def __init__(self) -> None:
        self.wanted = threading.Event()
        self.pid = -1

    def wake(self) -> None:
        if self.pid != os.getpid():  # first use, or a forked child (threads do not survive a fork)
            self.pid = os.getpid()
            threading.Thread(target=self._run, name="agent-health-spans", daemon=True).start()
        self.wanted.set()

    def _run(self) -> None:
        while True:
            self.wanted.wait()
            time.sleep(_FLUSH_S)  # let the runs finishing meanwhile go in the same write
            self.wanted.clear()
            flush_all()


def flush_all() -> None:
    """Write every pending line of this process (the flusher does it; so does exit)."""
    with _LOCK:
        writers = list(_WRITERS.values())
    for writer in writers:
        writer.flush()


_FLUSHER = _Flusher()
_STEMS = itertools.count(1)
atexit.register(flush_all)


def reset() -> None:
    """Close this process's span files and forget every index (as a fresh process would start)."""
    flush_all()
    with _LOCK:
        for writer in _WRITERS.values():
            for fh in writer.files.values():
                fh.close()
        _WRITERS.clear()
        _INDEXES.clear()


class LocalSpanStore:
    """Writes and reads spans and logs in one folder; safe across threads and processes."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        key = os.path.abspath(self.root)
        with _LOCK:
            self._index = _INDEXES.setdefault(key, _Index(self.root))
            self._writer = _WRITERS.setdefault(key, _Writer(self.root, self._index))

    def write_spans(self, spans: Iterable[dict[str, Any]]) -> None:
        """Append one batch of spans (e.g. one run's)."""
        with _LOCK:
            self._writer.write("spans", list(spans))

    def write_logs(self, logs: Iterable[dict[str, Any]]) -> None:
        """Append one batch of log records."""
        with _LOCK:
            self._writer.write("logs", list(logs))

    def _read(self, kind: str, key: str) -> list[dict[str, Any]]:
        for _ in range(3):  # normally once; again when a write queued more of them meanwhile
            self._writer.flush()  # the lines below are read from the files
            with _LOCK:
                # Look at the folder only on a miss: what this process wrote is indexed already,
                # and reading other writers' files (the folder's whole history, the first time) costs.
                # This process's own lines are indexed the same way, when a key may be among them.
                if not self._index.has(kind, key) or self._index.stale(kind, key):
                    self._index.refresh()
                lines = self._index.where(kind, key)
            if self._writer.on_disk(lines):
                break
        # read outside the lock: indexed lines are whole and never change, and writers (the demo
        # agent, on the event loop) must not wait for a reader's file I/O
        return _Index.read(kind, key, lines)

    def cached(self, kind: str, key: str) -> list[dict[str, Any]] | None:
        """`trace`/`by_run_id` without I/O: the records when this process wrote them lately."""
        with _LOCK:
            return self._index.cached(kind, key)

    def trace(self, trace_id: str, logs: bool = False) -> list[dict[str, Any]]:
        """Every span (or log record) of one trace."""
        return self._read("logs" if logs else "spans", trace_id)

    def by_run_id(self, run_id: str, logs: bool = False) -> list[dict[str, Any]]:
        """Records whose first run id attribute present (agent_health.run.id, gen_ai.conversation.id)
        equals `run_id`."""
        return self._read("logs_by_run" if logs else "spans_by_run", run_id)

    def all_spans(self) -> list[dict[str, Any]]:
        self._writer.flush()
        with _LOCK:
            self._index.refresh()
            return list(self._index.all_records())


class LocalTraceSource(TraceSource):
    """Trace source over a `LocalSpanStore`."""

    name = "local"

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        exclude_services: Iterable[str] = HARNESS_SERVICES,
        run_id_attributes: Iterable[str] = RUN_ID_ATTRIBUTES,
        window_slack_s: float = 2.0,
    ):
        self.store = LocalSpanStore(root)
        self.exclude = tuple(exclude_services)
        self.run_id_attributes = tuple(run_id_attributes)
        self.slack_s = window_slack_s

    def describe(self) -> str:
        return f"local span store {self.store.root}"

    def _clean(self, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [s for s in spans if not is_harness(s, self.exclude)]

    def _by_run_id(self, run_id: str, logs: bool = False) -> list[dict[str, Any]]:
        if self.run_id_attributes == RUN_ID_ATTRIBUTES:
            return self.store.by_run_id(run_id, logs)
        records = self.store.all_spans() if not logs else []
        return [
            r for r in records if any(str((r.get("attributes") or {}).get(a)) == run_id for a in self.run_id_attributes)
        ]

    def peek(self, run: RunRef) -> Fetched | None:
        """From memory only: the spans of a run this process wrote lately (the demo agent's)."""
        cached = self.store.cached("spans", run.trace_id) if run.trace_id else None
        spans = self._clean(cached) if cached else []
        return Fetched(spans, "trace_id", run.trace_id) if spans else None

    def fetch(self, run: RunRef) -> Fetched:
        if run.trace_id:
            spans = self._clean(self.store.trace(run.trace_id))
            if spans:
                return Fetched(spans, "trace_id", run.trace_id)
        spans = self._clean(self._by_run_id(run.run_id))
        if spans:
            return Fetched(spans, "run_id", run.run_id)
        if run.service and run.started_at:
            lo, hi = run.window_ms(self.slack_s)
            candidates = [
                s
                for s in self._clean(self.store.all_spans())
                if s.get("service") == run.service and lo <= (s.get("start_ms") or 0) <= hi
            ]
            chosen = best_trace_in_window(candidates, run)
            if chosen:
                trace_id = str(chosen[0].get("trace_id"))
                return Fetched(self._clean(self.store.trace(trace_id)), "time_window", trace_id)
        return Fetched()

    def logs(self, run: RunRef, found: Fetched) -> list[dict[str, Any]]:
        if found.correlation in ("trace_id", "time_window") and found.key:
            records = self.store.trace(str(found.key), logs=True)
        elif found.correlation == "run_id":
            records = self._by_run_id(run.run_id, logs=True)
        else:
            records = []
        return sorted((r for r in records if r.get("service") not in self.exclude), key=lambda r: r.get("time_ms") or 0)

    def search(self, run: RunRef, found: Fetched, body: dict[str, Any]) -> list[dict[str, Any]]:
        checked = dsl.validate(body)
        query = checked.get("query") or {"match_all": {}}
        # Only this run's (already harness-free) spans are ever searched.
        matches = dsl.compile_query(query)
        hits = [s for s in found.spans if matches(s)]
        return hits[checked["from"] : checked["from"] + checked["size"]]
