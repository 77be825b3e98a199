"""The local store's suite index: where each test's latest result is, so a batch of results costs
one append per suite instead of one new file per result (creating files was nearly all the
system time of a stored run).

`<root>/<agent>/<suite>/_index.jsonl` is appended to once per batch, in one write, and fsynced.
Each line names one test:

- `["<test id>", "<run id>", offset, length]`: its latest result is those bytes of
  `_runs/<run id>/results.jsonl` (the run's log, which holds every result in full);
- `["<test id>", null]`: its own file `<test>.json` holds its latest result (a result stored
  without a run), or nothing does (deleted).

A test's last line wins. A test the index does not name has its own file or no result: stores
written before the index existed read as they did.

A batch's lines start with a newline, so a line a killed writer left torn ends there and is
skipped, and the lines after it stay whole; a reader leaves a last line without its newline (being
written) for its next read. Once the index holds several times more lines than tests, it is
rewritten with the current line of each test (`compact`): under an exclusive `flock` that
appenders' shared locks wait for, to a temporary file renamed over it; an appender whose file
was replaced meanwhile opens the new one. The rewritten file starts with a header line
(`{"index": 1, "live": <its size>, "id": <random>}`) that tells the writers' size check how large
the index was when it was last rewritten, and tells a reader's cache a new file from the old.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field

from agent_health.files import append_whole, cut_back, discard, fsync_folder, write_temp

try:
    import fcntl
except ImportError:  # Windows: appends still work; the index is never rewritten there
    fcntl = None  # type: ignore[assignment]

INDEX_NAME = "_index.jsonl"  # never a test's file: those end in ".json"

# Where a test's latest result is: (run id, offset, length) in that run's log, or None: its own
# file (or nothing).
Pointer = tuple[str, int, int] | None

# A reader that parsed the whole index rewrites it when it holds more than this many lines a test
# and more than READER_COMPACT_BYTES; a writer (who never parses) when the file passed
# WRITER_COMPACT_BYTES and this many times its size at the last rewrite.
COMPACT_RATIO = 4
READER_COMPACT_BYTES = 1 << 20
WRITER_COMPACT_BYTES = 32 << 20
_HEAD = 128  # bytes read to compare files and find the header


@dataclass
class IndexView:
    """What one reader knows of an index file: its pointers as of `size` bytes (whole lines)."""

    ino: int
    head: bytes  # the file's first bytes: a rewritten file that got the old inode number differs
    size: int
    lines: int
    pointers: dict[str, Pointer] = field(default_factory=dict)


_quote = json.encoder.encode_basestring_ascii  # a JSON string, as json.dumps writes it (ASCII)


def entry_line(test_id: str, pointer: Pointer) -> bytes:
    """One index line (no newline): formatted directly, a tenth of json.dumps' time on a list."""
    if pointer is None:
        return b"[%s, null]" % _quote(test_id).encode()
    run_id, offset, length = pointer
    return b"[%s, %s, %d, %d]" % (_quote(test_id).encode(), _quote(run_id).encode(), offset, length)


def _parse(data: bytes, pointers: dict[str, Pointer]) -> int:
    """Apply the whole lines of `data` to `pointers`; the number of entries read."""
    lines = [line for line in data.split(b"\n") if line[:1] == b"["]
    try:  # the common case in one call: every line whole
        entries = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:  # a torn line of a killed writer among them: each line on its own
        entries = []
        for line in lines:
            with contextlib.suppress(ValueError):
                entries.append(json.loads(line))
    n = 0
    for e in entries:
        if not (isinstance(e, list) and e and isinstance(e[0], str)):
            continue
        if len(e) == 4 and isinstance(e[1], str) and isinstance(e[2], int) and isinstance(e[3], int):
            pointers[e[0]] = (e[1], e[2], e[3])
        elif len(e) == 2 and e[1] is None:
            pointers[e[0]] = None
        else:
            continue
        n += 1
    return n


def read_index(path: str, known: IndexView | None) -> IndexView | None:
    """The index at `path` as of now (None: there is none), reading only what was appended since
    `known` when that is the same file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if known is not None and known.ino == st.st_ino and st.st_size >= known.size:
            if st.st_size == known.size:
                return known
            if os.pread(fd, len(known.head), 0) == known.head:
                tail = os.pread(fd, st.st_size - known.size, known.size)
                whole = tail.rfind(b"\n") + 1
                known.lines += _parse(tail[:whole], known.pointers)
                known.size += whole
                return known
        data = os.pread(fd, st.st_size, 0)
    finally:
        os.close(fd)
    whole = data.rfind(b"\n") + 1
    view = IndexView(ino=st.st_ino, head=data[:_HEAD], size=whole, lines=0)
    view.lines = _parse(data[:whole], view.pointers)
    return view


def append_index(path: str, lines: list[bytes]) -> tuple[int, int]:
    """Append `lines` in one write and fsync them: (offset, length) of what was appended, for
    `cut_back` if the batch fails after all. Rewrites the index when it grew large (see the
    module docstring)."""
    data = b"\n" + b"\n".join(lines) + b"\n"
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_SH)  # waits while the index is being rewritten
                if os.fstat(fd).st_ino != os.stat(path).st_ino:
                    continue  # rewritten meanwhile: append to the new file
            append_whole(fd, data)
            end = os.lseek(fd, 0, os.SEEK_CUR)
            try:
                os.fsync(fd)
            except OSError:
                cut_back(path, end - len(data), len(data))
                raise
            grown = end > WRITER_COMPACT_BYTES and end > COMPACT_RATIO * _live_size(fd)
        finally:
            os.close(fd)
        if grown:
            compact(path)
        return end - len(data), len(data)


def _live_size(fd: int) -> int:
    """The index's size when it was last rewritten (its header), or 0."""
    head = os.pread(fd, _HEAD, 0).split(b"\n", 1)[0]
    if head[:1] == b"{":
        with contextlib.suppress(ValueError, AttributeError):
            return int(json.loads(head).get("live", 0))
    return 0


def should_compact(view: IndexView) -> bool:
    """A reader's view of an index worth rewriting."""
    return view.size > READER_COMPACT_BYTES and view.lines > COMPACT_RATIO * len(view.pointers)


def compact(path: str) -> bool:
    """Rewrite the index with each test's current line (tests whose line says "own file" need
    none: without a line, the file decides). False when it could not be (no locks on this
    system, a read-only store, another process rewrote it first)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # no appender is between its check and its write now
        st = os.fstat(fd)
        if st.st_ino != os.stat(path).st_ino:
            return False
        pointers: dict[str, Pointer] = {}
        data = os.pread(fd, st.st_size, 0)
        _parse(data[: data.rfind(b"\n") + 1], pointers)
        body = b"".join(entry_line(t, p) + b"\n" for t, p in pointers.items() if p is not None)
        header = json.dumps({"index": 1, "live": len(body), "id": os.urandom(8).hex()}).encode() + b"\n"
        folder = os.path.dirname(path)
        tmp = write_temp(folder, INDEX_NAME, header + body)
        try:
            os.replace(tmp, path)
        except OSError:
            discard(tmp)
            raise
        fsync_folder(folder)
    except OSError:
        return False
    else:
        return True
    finally:
        os.close(fd)
