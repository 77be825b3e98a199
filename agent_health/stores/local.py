"""Local-file result store. The layout:

    <root>/_runs/<run id>/run.json            a run's manifest
    <root>/_runs/<run id>/results.jsonl       every result the run stored, in full, appended
    <root>/<agent>/<suite>/_index.jsonl       where each test's latest result is (`local_index`)
    <root>/<agent>/<suite>/<test>.json        a result stored without a run (and every result of
                                              stores written before the index existed)

A batch of results (`put_many`, as a run's sink hands them over) costs one append to its run's
log and one to each suite's index, whatever its size: storing no longer creates a file per
result, which was nearly all the system time of a stored run.

Durability (what `put` and `put_many` promise once they return): a process that is killed
(SIGKILL, OOM, a crash) and a machine that crashes or loses power lose nothing they stored,
and no reader, then or later, sees a torn result. The run log and the index are appended to in
one write each (whole lines: a killed writer leaves at most a torn last line, which readers
skip) and both are fsynced before `put_many` returns, with every folder whose entries changed; a
result file is written whole, fsynced, then renamed into place (atomic). A result in a run log is
read through the index's (offset, length), so lines appended later never move it.
"""

from __future__ import annotations

import builtins
import functools
import os
import re
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote, unquote

from pydantic import BaseModel, ValidationError

from agent_health.config import Config
from agent_health.files import append_whole, cut_back, discard, fsync_folder, write_atomic, write_temp
from agent_health.lazy import deferred
from agent_health.model import EvalRun, StoreSettings, TestResult
from agent_health.model.calibration import Calibration, Label
from agent_health.model.validation import describe_errors
from agent_health.stores.base import ResultKey, ResultStore, StoreError, newest_labels, skip_unreadable_run
from agent_health.stores.local_index import (
    INDEX_NAME,
    IndexView,
    Pointer,
    append_index,
    compact,
    entry_line,
    read_index,
    should_compact,
)

if TYPE_CHECKING:
    import agent_health.stores.summary as stores_summary
    from agent_health.stores.summary import ResultSummary
else:
    stores_summary = deferred("agent_health.stores.summary")

# summaries (what rollups read) load on the first read of them, never in a run that only writes
M = TypeVar("M", TestResult, "ResultSummary")
T = TypeVar("T", bound=BaseModel)


def _summary_type() -> type[ResultSummary]:
    return stores_summary.ResultSummary


_SUFFIX = ".json"
RUNS_DIR = "_runs"  # never an agent folder: those are KEY@VERSION
CALIBRATION_DIR = "_calibration"  # labels.jsonl and calibrations.jsonl, appended (never an agent folder)
_UNSAFE_NAME = re.compile(r"^\.+$")


_COMMON = re.compile(r"[A-Za-z0-9@\-_+=,.~:/]*")


def encode_part(part: str) -> str:
    """One path component per key part; quoting keeps '/', ':' and '@' reversible on any OS.
    Test ids nearly always hold only ':' and '/' to escape: a fast path gives quote()'s result
    for them (it is called once per result read, 10,000 times in a large rollup)."""
    if _COMMON.fullmatch(part):
        text = part.replace(":", "%3A").replace("/", "%2F")
    else:
        text = quote(part, safe="@-_+=,")
    return text if not _UNSAFE_NAME.match(text) else text.replace(".", "%2E")


class LocalResultStore(ResultStore):
    """Results as JSON files under `root` (see the module docstring for what a write promises)."""

    concurrent_writes = 0  # written on the run sink's thread: see ResultStore.concurrent_writes

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._folders: set[str] = set()  # folders this store has seen exist
        self._logs: set[str] = set()  # run logs this store has seen exist
        self._indexes: dict[str, IndexView] = {}  # suite folder -> what this store read of its index
        self._reading = threading.Lock()  # one refresh of a cached index at a time

    @property
    def location(self) -> str:
        return str(self.root)

    def path_for(self, key: ResultKey) -> Path:
        return Path(self._folder(key.agent, key.suite), encode_part(key.test_id) + _SUFFIX)

    @functools.lru_cache(maxsize=1024)  # noqa: B019 - a store lives as long as its process
    def _folder(self, agent: str, suite: str) -> str:
        return os.path.join(self.root, encode_part(agent), encode_part(suite))

    def put(self, result: TestResult) -> ResultKey:
        return self.put_many([result])[0]

    def put_many(self, results: Iterable[TestResult]) -> list[ResultKey]:
        """Store a batch: the results of a run are appended to its log in one write, then each
        suite's index gets their places in one more (both fsynced); a result without a run gets
        its own file (written whole, fsynced, renamed into place) and an index line saying so.
        A few system calls and fsyncs per batch, none per result.

        All or nothing, as far as the disk lets it: a write that fails (a full disk) leaves no line
        in a run log or an index (what was appended is cut back) and no file replaced, so a batch
        counted as not stored is not readable either. Only renaming failing part-way (a folder
        that cannot grow on a full disk) can leave the files before it replaced."""
        batch = [(ResultKey.of(r), r.eval_run_id, r.json_text().encode()) for r in results]
        key: ResultKey | None = None
        appended: list[tuple[str, int, int]] = []  # (run log or index, offset, bytes appended)
        temps: list[tuple[str, str]] = []  # (temporary file, its result file) of results without a run
        try:
            to_sync: set[str] = set()
            for key, _, _ in batch:  # folders first: a batch that cannot be written logs nothing
                to_sync.update(self._ensure_folder(self._folder(key.agent, key.suite)))
            key = None
            by_run: dict[str, list[bytes]] = {}
            for _, run_id, data in batch:
                if run_id:
                    by_run.setdefault(run_id, []).append(data)
            places: dict[str, int] = {}  # run id -> the offset of its next line in this batch
            for run_id, lines in by_run.items():
                log, offset, length = self._append_run_results(run_id, lines)
                appended.append((log, offset, length))
                places[run_id] = offset
            by_folder: dict[str, list[bytes]] = {}
            for key, run_id, data in batch:
                folder = self._folder(key.agent, key.suite)
                pointer: Pointer = None
                if run_id:
                    pointer = (run_id, places[run_id], len(data))
                    places[run_id] += len(data) + 1
                else:
                    name = encode_part(key.test_id) + _SUFFIX
                    temps.append((self._written(folder, name, data), os.path.join(folder, name)))
                by_folder.setdefault(folder, []).append(entry_line(key.test_id, pointer))
            key = None
            for i, (tmp, path) in enumerate(temps):
                os.replace(tmp, path)
                temps[i] = ("", path)  # renamed: nothing left to discard
                to_sync.add(os.path.dirname(path))
            for folder, lines in by_folder.items():
                appended.append(self._append_index(folder, lines))
            for folder in to_sync:
                fsync_folder(folder)
        except OSError as exc:
            # The lines of results that are not stored, the indexes first: index lines that must
            # stay (another writer appended after them) keep the run-log lines they point at.
            for path, offset, length in reversed(appended):
                if not cut_back(path, offset, length):
                    break
            what = f"{key.agent} {key.test_id}" if key else f"{len(batch)} result(s)"
            raise StoreError(f"result store {self.root}: cannot write {what}: {exc.strerror or exc}") from exc
        finally:
            for tmp, _ in temps:
                if tmp:
                    discard(tmp)  # a temporary file not renamed
        return [k for k, _, _ in batch]

    def _written(self, folder: str, name: str, data: bytes) -> str:
        """`data` in a new temporary file for `folder/name`, fsynced (renamed into place by the
        caller): a result without a run has no log to fall back on."""
        try:
            return write_temp(folder, name, data)
        except FileNotFoundError:  # the folder was removed since this store saw it
            self._folders.discard(folder)
            for path in self._ensure_folder(folder):
                fsync_folder(path)
            return write_temp(folder, name, data)

    def _ensure_folder(self, folder: str) -> list[str]:
        """Make sure `folder` exists; the folders whose entries that changed: the parents of
        those it had to create."""
        if folder in self._folders:
            return []
        created: list[str] = []
        path = folder
        while not os.path.isdir(path):
            created.append(path)
            path = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        self._folders.add(folder)
        return [os.path.dirname(p) for p in created]

    # -- run history ----------------------------------------------------------------------------
    def _run_dir(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise StoreError(f"result store {self.root}: invalid run id {run_id!r}")
        return self.root / RUNS_DIR / run_id

    def _append_run_results(self, run_id: str, lines: list[bytes]) -> tuple[str, int, int]:
        """Append lines to the run's log in one write, and fsync it. The log, the offset of the
        first line appended (the suite index points there) and the bytes appended (to cut them
        back when the batch fails)."""
        folder = str(self._run_dir(run_id))
        log = os.path.join(folder, "results.jsonl")
        new = log not in self._logs
        to_sync = [folder, *self._ensure_folder(folder)] if new else []
        # One write() of whole lines on an O_APPEND descriptor: writers in other processes of the
        # same run never interleave inside a line, and a kill leaves at most one torn last line.
        try:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except FileNotFoundError:  # the run folder was removed since this store saw it
            self._logs.discard(log)
            self._folders.discard(folder)
            new, to_sync = True, [folder, *self._ensure_folder(folder)]
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        data = b"\n".join(lines) + b"\n"
        try:
            append_whole(fd, data)  # a full disk leaves no torn line
            # where this write landed: another process may have appended since the open
            offset = os.lseek(fd, 0, os.SEEK_CUR) - len(data)
            try:
                os.fsync(fd)
            except OSError:
                cut_back(log, offset, len(data))
                raise
        finally:
            os.close(fd)
        if new:  # the log's own entry (and a new run folder's) must be on disk too
            for path in to_sync:
                fsync_folder(path)
            self._logs.add(log)
        return log, offset, len(data)

    def _append_index(self, folder: str, lines: list[bytes]) -> tuple[str, int, int]:
        """Append a batch's lines to the index of the suite in `folder`."""
        index = os.path.join(folder, INDEX_NAME)
        try:
            offset, length = append_index(index, lines)
        except FileNotFoundError:  # the folder was removed since this store saw it
            self._folders.discard(folder)
            self._logs.discard(index)
            for path in self._ensure_folder(folder):
                fsync_folder(path)
            offset, length = append_index(index, lines)
        if index not in self._logs:  # the index's own entry must be on disk too
            fsync_folder(folder)
            self._logs.add(index)
        return index, offset, length

    def put_run(self, run: EvalRun) -> None:
        try:
            write_atomic(self._run_dir(run.id) / "run.json", run.model_dump_json(indent=1))
        except OSError as exc:
            raise StoreError(f"result store {self.root}: cannot write run {run.id}: {exc.strerror or exc}") from exc

    def get_run(self, run_id: str) -> EvalRun | None:
        path = self._run_dir(run_id) / "run.json"
        try:
            return EvalRun.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as exc:
            raise StoreError(f"result store {self.root}: cannot read run {run_id}: {_why(exc)}") from exc

    def list_runs(self) -> list[EvalRun]:
        folder = self.root / RUNS_DIR
        if not folder.is_dir():
            return []
        runs = []
        for sub in folder.iterdir():
            path = sub / "run.json"
            try:
                runs.append(EvalRun.model_validate_json(path.read_bytes()))
            except (FileNotFoundError, NotADirectoryError):  # a run folder without a manifest yet, or a stray file
                continue
            except (OSError, ValidationError) as exc:
                skip_unreadable_run(str(path), _why(exc))
        return sorted(runs, key=lambda r: (r.started_at, r.id), reverse=True)

    def run_results(self, run_id: str) -> Iterator[TestResult]:
        """See `ResultStore.run_results`. A line that is not a result (a damaged log) is skipped;
        once every readable result was yielded, a StoreError names the skipped lines. Only the
        torn last line of a killed writer (no newline after it) is skipped silently: its batch
        was never stored."""
        path = self._run_dir(run_id) / "results.jsonl"
        if not path.is_file():
            return
        # First pass: which line holds the last copy of each key (a retried step stores twice).
        last: dict[ResultKey, int] = {}
        bad: dict[int, str] = {}  # line index -> why it was skipped
        summary = _summary_type()
        with path.open("rb") as fh:
            for n, line in enumerate(fh):
                try:
                    s = summary.model_validate_json(line)
                except ValidationError as exc:
                    if line.endswith(b"\n"):  # not the torn last line of a killed writer
                        bad[n] = describe_errors(exc)
                    continue
                last[ResultKey(s.agent, s.suite, s.test_id)] = n
        keep = set(last.values())
        read = 0
        with path.open("rb") as fh:
            for n, line in enumerate(fh):
                if n in keep:
                    try:
                        result = TestResult.model_validate_json(line)
                    except ValidationError as exc:
                        bad[n] = describe_errors(exc)
                        continue
                    read += 1
                    yield result
        if bad:
            lines = sorted(bad)
            named = ", ".join(str(n + 1) for n in lines[:20]) + (", ..." if len(lines) > 20 else "")
            raise StoreError(
                f"result store {self.root}: results.jsonl of run {run_id}: skipped line(s) {named}, not valid "
                f"results (line {lines[0] + 1}: {bad[lines[0]]}); {read} result(s) read"
            )

    # -- reading ----------------------------------------------------------------------------
    def _view(self, folder: str) -> IndexView | None:
        """The index of the suite in `folder` as of now: read once, then only what was appended
        since. A reader that read all of a large index full of replaced lines rewrites it."""
        index = os.path.join(folder, INDEX_NAME)
        with self._reading:
            known = self._indexes.get(folder)
            try:
                view = read_index(index, known)
            except OSError as exc:
                raise StoreError(f"result store {self.root}: cannot read {index}: {exc.strerror or exc}") from exc
            if view is None:
                self._indexes.pop(folder, None)
            else:
                self._indexes[folder] = view
        if view is not None and view is not known and should_compact(view):
            compact(index)
        return view

    def _read_many(self, keys: Iterable[ResultKey], model: type[M]) -> Iterator[M]:
        """The stored results (or summaries) of `keys` that exist, in order: each suite's index
        looked at once, each run log opened once."""
        views: dict[str, IndexView | None] = {}
        logs: dict[str, int] = {}
        try:
            for key in keys:
                folder = self._folder(key.agent, key.suite)
                if folder not in views:
                    views[folder] = self._view(folder)
                view = views[folder]
                pointer = view.pointers.get(key.test_id) if view is not None else None
                found = self._read_file(key, model) if pointer is None else self._read_logged(key, pointer, model, logs)
                if found is not None:
                    yield found
        finally:
            for fd in logs.values():
                os.close(fd)

    def _read_logged(self, key: ResultKey, pointer: tuple[str, int, int], model: type[M], logs: dict[str, int]) -> M:
        """A result from the bytes of its run's log the suite index points at."""
        run_id, offset, length = pointer
        log = self._run_dir(run_id) / "results.jsonl"
        where = f"result store {self.root}: the result of {key.agent} {key.test_id} ({log}, byte {offset})"
        try:
            fd = logs.get(run_id)
            if fd is None:
                fd = logs[run_id] = os.open(log, os.O_RDONLY)
            data = os.pread(fd, length, offset)
        except OSError as exc:
            raise StoreError(f"{where} cannot be read: {exc.strerror or exc}") from exc
        try:
            found = model.model_validate_json(data)
        except ValidationError as exc:
            raise StoreError(f"{where} is not a valid result: {describe_errors(exc)}") from exc
        if (found.agent, found.suite, found.test_id) != (key.agent, key.suite, key.test_id):
            raise StoreError(f"{where} is another test's result: the run log or the suite's index was damaged")
        return found

    def _read_file(self, key: ResultKey, model: type[M]) -> M | None:
        """A result from its own file (stored without a run, or by a version without the index)."""
        path = self.path_for(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"result store {self.root}: cannot read {path}: {exc.strerror or exc}") from exc
        try:
            return model.model_validate_json(data)
        except ValidationError as exc:
            logged = self._logged_copy(key)
            if logged is None:
                raise StoreError(
                    f"result store {self.root}: {path} is not a valid TestResult: {exc.errors()[0].get('msg', exc)}"
                ) from exc
        # A machine crash left this file empty or torn (before the suite index, result files were
        # not fsynced one by one); the run log it was stored in holds it in full: put it back.
        try:
            write_atomic(path, logged)
        except OSError:
            pass  # read-only store: still answer from the log
        return model.model_validate_json(logged)

    def _logged_copy(self, key: ResultKey) -> bytes | None:
        """The last line storing `key` in the most recently written run log that has one."""
        try:
            logs = [Path(e.path, "results.jsonl") for e in os.scandir(self.root / RUNS_DIR) if e.is_dir()]
            logs = sorted((p for p in logs if p.is_file()), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        except OSError:
            return None
        summary = _summary_type()
        for log in logs:
            found = None
            with log.open("rb") as fh:
                for line in fh:
                    try:
                        s = summary.model_validate_json(line)
                    except ValidationError:
                        continue  # a torn last line
                    if (s.agent, s.suite, s.test_id) == (key.agent, key.suite, key.test_id):
                        found = line.rstrip(b"\n")
            if found is not None:
                return found
        return None

    def get(self, key: ResultKey) -> TestResult | None:
        return next(self._read_many([key], TestResult), None)

    def get_many(self, keys: Iterable[ResultKey]) -> Iterator[TestResult]:
        return self._read_many(keys, TestResult)

    def get_summaries(self, keys: Iterable[ResultKey]) -> Iterator[ResultSummary]:
        return self._read_many(keys, _summary_type())

    def list(self, agent: str | None = None, suite: str | None = None) -> list[ResultKey]:
        if not self.root.is_dir():
            return []
        agents = (
            [self.root / encode_part(agent)]
            if agent
            else [p for p in self.root.iterdir() if p.is_dir() and p.name not in (RUNS_DIR, CALIBRATION_DIR)]
        )
        keys: list[ResultKey] = []
        for adir in agents:
            if not adir.is_dir():
                continue
            suites = [adir / encode_part(suite)] if suite else [p for p in adir.iterdir() if p.is_dir()]
            for sdir in suites:
                if not sdir.is_dir():
                    continue
                a, s = unquote(adir.name), unquote(sdir.name)
                tests: set[str] = set()
                with os.scandir(sdir) as it:
                    for entry in it:
                        name = entry.name
                        if name.endswith(_SUFFIX) and not name.startswith(".tmp-"):
                            tests.add(unquote(name[: -len(_SUFFIX)]))
                view = self._view(str(sdir))
                if view is not None:  # a test whose line says "own file" has one, or no result
                    tests.update(t for t, pointer in view.pointers.items() if pointer is not None)
                keys.extend(ResultKey(a, s, t) for t in tests)
        return sorted(keys)

    # -- calibration ---------------------------------------------------------------------
    def _append_lines(self, name: str, lines: builtins.list[bytes], what: str) -> None:
        """Append whole lines to `_calibration/<name>` in one write, fsynced (appended, never
        rewritten: nothing stored earlier can be lost)."""
        if not lines:
            return
        folder = str(self.root / CALIBRATION_DIR)
        try:
            to_sync = self._ensure_folder(folder)
            fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                append_whole(fd, b"\n".join(lines) + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            for path in to_sync:
                fsync_folder(path)
        except OSError as exc:
            raise StoreError(f"result store {self.root}: cannot write {what}: {exc.strerror or exc}") from exc

    def _read_lines(self, name: str, model: type[T]) -> builtins.list[T]:
        path = self.root / CALIBRATION_DIR / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"result store {self.root}: cannot read {path}: {exc.strerror or exc}") from exc
        out = []
        lines = data.split(b"\n")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                out.append(model.model_validate_json(line))
            except ValidationError as exc:
                if n == len(lines):  # the torn last line of a killed writer (no newline after it)
                    continue
                raise StoreError(f"result store {self.root}: {path}, line {n}: {describe_errors(exc)}") from None
        return out

    def put_labels(self, labels: Iterable[Label]) -> int:
        lines = [label.model_dump_json().encode() for label in labels]
        self._append_lines("labels.jsonl", lines, f"{len(lines)} label(s)")
        return len(lines)

    def labels(self) -> builtins.list[Label]:
        return newest_labels(self._read_lines("labels.jsonl", Label))

    def put_calibrations(self, calibrations: Iterable[Calibration]) -> None:
        lines = [c.model_dump_json().encode() for c in calibrations]
        self._append_lines("calibrations.jsonl", lines, f"{len(lines)} calibration(s)")

    def calibrations(self) -> builtins.list[Calibration]:
        return self._read_lines("calibrations.jsonl", Calibration)

    def delete(self, key: ResultKey) -> bool:
        folder = self._folder(key.agent, key.suite)
        view = self._view(folder)
        logged = view is not None and view.pointers.get(key.test_id) is not None
        try:
            self.path_for(key).unlink()
        except FileNotFoundError:
            removed = False
        else:
            removed = True
        if logged:  # its index line pointed into a run log: "own file" now, and there is none
            try:
                self._append_index(folder, [entry_line(key.test_id, None)])
            except OSError as exc:
                what = f"{key.agent} {key.test_id}"
                raise StoreError(f"result store {self.root}: cannot delete {what}: {exc.strerror or exc}") from exc
        return removed or logged


def default_store(config: Config, settings: StoreSettings | None = None) -> LocalResultStore:
    """A project's local store: the `path` setting (relative to the project root), by default
    `<state dir>/results`."""
    path = (settings or config.store).settings.get("path")
    return LocalResultStore(config.path(str(path)) if path else config.state_path / "results")


def _why(exc: OSError | ValidationError) -> str:
    """Why a file could not be read, on one line."""
    if isinstance(exc, ValidationError):
        return describe_errors(exc)
    return exc.strerror or str(exc)
