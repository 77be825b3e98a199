"""Local-file result store: `<root>/<agent>/<suite>/<test>.json`, written atomically, and the run
history under `<root>/_runs/<run id>/` (`run.json`, and `results.jsonl` appended as results are
stored, so a run killed mid-way keeps every result it stored).

Durability (what `put` and `put_many` promise once they return):
- a process that is killed (SIGKILL, OOM, a crash) loses nothing they stored, and no reader, then
  or later, sees a torn result file: each file is written whole before it gets its name (an
  unnamed file linked in, or, where the filesystem has none, a temporary file; an old file is
  replaced by a rename, which is atomic), and written data outlives the process in the page cache;
- a machine that crashes or loses power loses nothing they stored either: a batch's lines are
  appended to each run's `results.jsonl` in one write, and that log and every folder the batch
  touched are fsynced once per batch before `put_many` returns. The result files themselves are
  not fsynced one by one (that was 90% of the cost of storing): a file named in the seconds
  before a power loss can come back empty, and reading it then rebuilds it from the newest run
  log holding its key. A result without a run id has no log, so its file is fsynced itself.
"""

from __future__ import annotations

import builtins
import functools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote, unquote

from pydantic import BaseModel, ValidationError

from agent_health.config import Config
from agent_health.files import (
    append_whole,
    cut_back,
    discard,
    fsync_folder,
    name_unnamed,
    open_folder,
    unnamed_file,
    write_atomic,
    write_temp,
)
from agent_health.lazy import deferred
from agent_health.model import EvalRun, StoreSettings, TestResult
from agent_health.model.calibration import Calibration, Label
from agent_health.model.validation import describe_errors
from agent_health.stores.base import ResultKey, ResultStore, StoreError, newest_labels, skip_unreadable_run

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


# A batch keeps at most this many unnamed files open until they are named; the rest take
# temporary files (same guarantees, one more folder change each), far below a process's file limit.
_UNNAMED_MAX = 256


class LocalResultStore(ResultStore):
    """Results as JSON files under `root` (see the module docstring for what a write promises)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._folders: set[str] = set()  # folders this store has seen exist
        self._logs: set[str] = set()  # run logs this store has seen exist
        self._unlinkable: set[str] = set()  # folders whose filesystem has no unnamed files (O_TMPFILE)

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
        """Store a batch: each result file written whole but not yet named (an unnamed file, or a
        temporary one), then its run-log lines in one append and one fsync per run, then the files
        named (linked in, or renamed into place), then one fsync per folder: about 4 system calls
        per result instead of 14, and a few fsyncs per batch instead of one per result.

        All or nothing, as far as the disk lets it: a write that fails (a full disk) before the
        files are named leaves no file replaced and no line in a run log (a log appended to is
        cut back), so a batch counted as not stored is not readable either. Only naming failing
        part-way (a folder that cannot grow on a full disk) can leave the files before it replaced."""
        batch = [(ResultKey.of(r), r.eval_run_id, r.json_text().encode()) for r in results]
        key: ResultKey | None = None
        written: list[tuple[str, int | str, str]] = []  # (folder, unnamed file's fd or temporary file, name)
        appended: list[tuple[str, int, int]] = []  # (run log, its size before, bytes appended)
        fds: dict[str, int | None] = {}  # folder -> its descriptor for the batch; None: temporary files there
        try:
            to_sync: set[str] = set()
            for key, _, _ in batch:  # folders first: a batch that cannot be written logs nothing
                to_sync.update(self._ensure_folder(self._folder(key.agent, key.suite)))
            for key, run_id, data in batch:
                folder, name = self._folder(key.agent, key.suite), encode_part(key.test_id) + _SUFFIX
                fd = self._unnamed(folder, data, fds) if run_id and len(written) < _UNNAMED_MAX else None
                written.append((folder, self._written(folder, name, data, not run_id) if fd is None else fd, name))
            key = None
            by_run: dict[str, list[bytes]] = {}
            for _, run_id, data in batch:
                if run_id:
                    by_run.setdefault(run_id, []).append(data)
            for run_id, lines in by_run.items():
                appended.append(self._append_run_results(run_id, lines))
            for i, (folder, file, name) in enumerate(written):
                key = batch[i][0]  # named if naming it fails
                if isinstance(file, int):
                    name_unnamed(fds[folder], file, name)  # type: ignore[arg-type]
                else:
                    os.replace(file, os.path.join(folder, name))
                    written[i] = (folder, "", name)  # renamed: nothing left to discard
            for folder in to_sync:
                fd = fds.get(folder)
                if fd is not None:
                    os.fsync(fd)
                else:
                    fsync_folder(folder)
        except OSError as exc:
            for log, before, length in appended:  # the lines of results that are not stored
                cut_back(log, before, length)
            what = f"{key.agent} {key.test_id}" if key else f"the run log of {len(batch)} result(s)"
            raise StoreError(f"result store {self.root}: cannot write {what}: {exc.strerror or exc}") from exc
        finally:
            for _, file, _ in written:
                if isinstance(file, int):
                    os.close(file)  # an unnamed file never named is gone with its descriptor
                elif file:
                    discard(file)  # a temporary file not renamed
            for fd in fds.values():
                if fd is not None:
                    os.close(fd)
        return [k for k, _, _ in batch]

    def _unnamed(self, folder: str, data: bytes, fds: dict[str, int | None]) -> int | None:
        """`data` in an unnamed file of `folder` (its descriptor), or None where the folder's
        filesystem has none (remembered: the folder takes temporary files from then on)."""
        if folder in self._unlinkable:
            return None
        if folder not in fds:
            try:
                fds[folder] = open_folder(folder)
            except FileNotFoundError:  # removed since this store saw it: `_written` makes it again
                return None
        fd = fds[folder]
        if fd is None:
            return None
        try:
            unnamed = unnamed_file(fd, data)
        except FileNotFoundError:  # the folder was removed since: `_written` makes it again
            return None
        if unnamed is None:  # the first file asked for in this folder: none of the batch uses `fd`
            self._unlinkable.add(folder)
            os.close(fd)
            fds[folder] = None
        return unnamed

    def _written(self, folder: str, name: str, data: bytes, sync: bool) -> str:
        """`data` in a new temporary file for `folder/name` (renamed into place by the caller)."""
        try:
            return write_temp(folder, name, data, sync=sync)
        except FileNotFoundError:  # the folder was removed since this store saw it
            self._folders.discard(folder)
            for path in self._ensure_folder(folder):
                fsync_folder(path)
            return write_temp(folder, name, data, sync=sync)

    def _ensure_folder(self, folder: str) -> list[str]:
        """Make sure `folder` exists; the folders whose entries a write there changes: `folder`
        and the parents of those it had to create."""
        if folder in self._folders:
            return [folder]
        created: list[str] = []
        path = folder
        while not os.path.isdir(path):
            created.append(path)
            path = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        self._folders.add(folder)
        return [folder, *(os.path.dirname(p) for p in created)]

    # -- run history ----------------------------------------------------------------------------
    def _run_dir(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise StoreError(f"result store {self.root}: invalid run id {run_id!r}")
        return self.root / RUNS_DIR / run_id

    def _append_run_results(self, run_id: str, lines: list[bytes]) -> tuple[str, int, int]:
        """Append lines to the run's log in one write, and fsync it: once this returns, the
        results are on disk whatever becomes of their own files. The log, its size before and
        the bytes appended (to cut them back when the batch fails after all)."""
        folder = str(self._run_dir(run_id))
        log = os.path.join(folder, "results.jsonl")
        new = log not in self._logs
        to_sync = self._ensure_folder(folder) if new else []
        # One write() of whole lines on an O_APPEND descriptor: writers in other processes of the
        # same run never interleave inside a line, and a kill leaves at most one torn last line.
        try:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except FileNotFoundError:  # the run folder was removed since this store saw it
            self._logs.discard(log)
            self._folders.discard(folder)
            new, to_sync = True, self._ensure_folder(folder)
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        data = b"\n".join(lines) + b"\n"
        try:
            before = os.fstat(fd).st_size
            append_whole(fd, data)  # a full disk leaves no torn line
            try:
                os.fsync(fd)
            except OSError:
                cut_back(log, before, len(data))
                raise
        finally:
            os.close(fd)
        if new:  # the log's own entry (and a new run folder's) must be on disk too
            for path in to_sync:
                fsync_folder(path)
            self._logs.add(log)
        return log, before, len(data)

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

    def _read(self, key: ResultKey, model: type[M]) -> M | None:
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
        # A machine crash left this file empty or torn (files are not fsynced one by one); the run
        # log it was stored in holds it in full: put it back.
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
        return self._read(key, TestResult)

    def get_summaries(self, keys: Iterable[ResultKey]) -> Iterator[ResultSummary]:
        summary_type = _summary_type()
        for key in keys:
            summary = self._read(key, summary_type)
            if summary is not None:
                yield summary

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
                with os.scandir(sdir) as it:
                    for entry in it:
                        name = entry.name
                        if name.endswith(_SUFFIX) and not name.startswith(".tmp-"):
                            keys.append(ResultKey(a, s, unquote(name[: -len(_SUFFIX)])))
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
        try:
            self.path_for(key).unlink()
        except FileNotFoundError:
            return False
        else:
            return True


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
