"""The summary log of one (agent version, suite): what the S3 store's writers record beside the
results, so a reader gets every summary from a few log objects instead of one read per result.

This module is the log's data and its one rule; the S3 side (who writes what, when, and how a
reader verifies and compacts) is `stores/s3_log.py`.

A log is a set of chunks (objects), each a JSON-lines document: a header line, then one entry
per test. An entry says what one write left in the test's result object: its ETag and summary,
or that it was deleted; and when that write happened, as an interval of the server's clock:
`began` (before the write was sent) and `ended` (after it had finished). Intervals use the
server's clock (the `Date` of its responses, an object's `LastModified`), whole seconds rounded
outwards, so machines with skewed clocks still agree on them.

The rule: of a test's entries, the current one is the entry written after every other one
finished (`dominates`): its `began` is at least `skew` seconds after their `ended`, or it comes
from the same writer's later batch (one writer's batches for a suite never overlap). When no
entry is later than all the others (two machines wrote the test within a few seconds), the log
cannot tell, and the reader reads the result object itself. Entries that agree (the same ETag)
never conflict.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass

from agent_health.stores.summary import ResultSummary

LOG_FORMAT = 1
ChunkKind = Literal["pending", "committed", "merged", "compact"]
_LEAN = ConfigDict(extra="ignore", cache_strings="all")


@pydantic_dataclass(frozen=True, slots=True, config=_LEAN)
class ChunkHeader:
    """The first line of a chunk.

    kind: `pending` (a writer is about to write these tests' results: `doubt` lists them),
    `committed` (the writes are done; their entries follow, `doubt` lists writes that failed),
    `merged` (one writer's committed chunks in one) or `compact` (a reader's resolution of
    several chunks: one entry per test). Entries of `committed` chunks take `began`, `writer`
    and `batch` from the header and `ended` from the chunk's LastModified; the others carry
    their own."""

    format: int
    kind: ChunkKind
    writer: str | None = None
    batch: int | None = None
    began: float | None = None
    doubt: tuple[str, ...] = ()


@pydantic_dataclass(frozen=True, slots=True, config=_LEAN)
class _Line:
    """One entry line as stored (short names: a compacted log holds one per test)."""

    k: str
    e: str | None = None
    s: ResultSummary | None = None
    a: float | None = None
    c: float | None = None
    w: str | None = None
    n: int | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """What one write left in a test's result object, and when (server clock, seconds)."""

    test_id: str
    etag: str | None  # None: the result was deleted
    summary: ResultSummary | None
    began: float
    ended: float
    writer: str | None = None
    batch: int | None = None

    @property
    def deleted(self) -> bool:
        return self.etag is None


@dataclass(frozen=True, slots=True)
class Chunk:
    """One log object, read."""

    name: str
    header: ChunkHeader
    entries: list[Entry]
    modified: float  # its LastModified (server clock)


_HEADER = TypeAdapter(ChunkHeader)
_LINE = TypeAdapter(_Line)


def floor_s(t: float) -> float:
    """A server time as the start of its whole second (what `began` may safely claim)."""
    return float(math.floor(t))


def ceil_s(t: float) -> float:
    """A server time as the end of its whole second (what `ended` may safely claim): clocks in
    headers and listings are whole seconds, the true time anywhere inside the next one."""
    return float(math.floor(t)) + 1.0


def header_line(
    kind: ChunkKind,
    *,
    writer: str | None = None,
    batch: int | None = None,
    began: float | None = None,
    doubt: Iterable[str] = (),
) -> bytes:
    doc = {"format": LOG_FORMAT, "kind": kind, "writer": writer, "batch": batch, "began": began, "doubt": list(doubt)}
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def entry_line(entry: Entry, *, timed: bool) -> bytes:
    """An entry as a line; `timed` writes its interval and writer too (merged and compact chunks)."""
    parts = ['{"k":', json.dumps(entry.test_id), ',"e":', json.dumps(entry.etag)]
    if entry.summary is not None:
        parts += [',"s":', entry.summary.model_dump_json()]
    if timed:
        parts += [',"a":', repr(entry.began), ',"c":', repr(entry.ended)]
        if entry.writer is not None:
            parts += [',"w":', json.dumps(entry.writer), ',"n":', str(entry.batch)]
    parts.append("}\n")
    return "".join(parts).encode()


def parse_chunk(name: str, data: bytes, modified: float) -> Chunk:
    """A chunk's header and entries; ValueError naming what is wrong when it is not a log chunk
    this version can read (a newer format, or not ours)."""
    lines = data.split(b"\n")
    try:
        header = _HEADER.validate_json(lines[0])
    except ValidationError as exc:
        raise ValueError(f"{name}: not a summary log chunk ({exc.errors()[0].get('msg', exc)})") from None
    if header.format != LOG_FORMAT:
        raise ValueError(f"{name}: summary log format {header.format}; this version reads format {LOG_FORMAT}")
    ended = ceil_s(modified)
    entries: list[Entry] = []
    for i, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        try:
            line = _LINE.validate_json(raw)
        except ValidationError as exc:
            raise ValueError(f"{name}: line {i} is not a log entry ({exc.errors()[0].get('msg', exc)})") from None
        began = line.a if line.a is not None else header.began
        if began is None or (line.e is not None and line.s is None):
            raise ValueError(f"{name}: line {i} lacks its time or summary")
        entries.append(
            Entry(
                line.k,
                line.e,
                line.s,
                began,
                line.c if line.c is not None else ended,
                line.w if line.a is not None else header.writer,
                line.n if line.a is not None else header.batch,
            )
        )
    return Chunk(name, header, entries, modified)


def observed(test_id: str, etag: str, summary: ResultSummary, modified: float) -> Entry:
    """An entry for a result object as a read found it: written at its LastModified."""
    return Entry(test_id, etag, summary, floor_s(modified), ceil_s(modified))


def observed_absent(test_id: str, since: float, until: float) -> Entry:
    """An entry for a result object a read found missing between two server times."""
    return Entry(test_id, None, None, floor_s(since), ceil_s(until))


def dominates(later: Entry, earlier: Entry, skew: float) -> bool:
    """True when `later`'s write certainly happened after `earlier`'s had finished."""
    same_writer = later.writer is not None and later.writer == earlier.writer
    if same_writer and later.batch is not None and earlier.batch is not None and earlier.batch < later.batch:
        return True
    return earlier.ended + skew <= later.began


def current(entries: Sequence[Entry], skew: float) -> Entry | None:
    """The entry that says what a test's result object holds now, or None when the log cannot
    tell (entries that disagree and overlap in time)."""
    if len(entries) == 1:
        return entries[0]
    for candidate in sorted(entries, key=lambda e: e.began, reverse=True):
        if all(
            other is candidate or other.etag == candidate.etag or dominates(candidate, other, skew) for other in entries
        ):
            return candidate
    return None
