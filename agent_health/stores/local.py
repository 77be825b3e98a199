"""Local-file result store: `<root>/<agent>/<suite>/<test>.json`, written atomically, and the run
history under `<root>/_runs/<run id>/` (`run.json`, and `results.jsonl` appended one line per
result as it finishes, so a run killed mid-way keeps every result it finished)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, unquote

from pydantic import ValidationError

from agent_health.config import Config
from agent_health.files import write_atomic
from agent_health.model import EvalRun, StoreSettings, TestResult
from agent_health.stores.base import ResultKey, ResultStore, StoreError
from agent_health.stores.summary import ResultSummary

M = TypeVar("M", TestResult, ResultSummary)

_SUFFIX = ".json"
RUNS_DIR = "_runs"  # never an agent folder: those are KEY@VERSION
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
    """Results as JSON files under `root`. Writes go to a temporary file in the same folder and
    are moved into place with `os.replace`, which is atomic on POSIX and Windows."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    @property
    def location(self) -> str:
        return str(self.root)

    def path_for(self, key: ResultKey) -> Path:
        return Path(self._folder(key.agent, key.suite), encode_part(key.test_id) + _SUFFIX)

    @functools.lru_cache(maxsize=1024)  # noqa: B019 - a store lives as long as its process
    def _folder(self, agent: str, suite: str) -> str:
        return os.path.join(self.root, encode_part(agent), encode_part(suite))

    def put(self, result: TestResult) -> ResultKey:
        key = ResultKey.of(result)
        path = self.path_for(key)
        data = result.model_dump_json().encode()
        try:
            write_atomic(path, data)
            if result.eval_run_id:
                self._append_run_result(result.eval_run_id, data)
        except OSError as exc:
            raise StoreError(
                f"result store {self.root}: cannot write {key.agent} {key.test_id}: {exc.strerror or exc}"
            ) from exc
        return key

    # -- run history ----------------------------------------------------------------------------
    def _run_dir(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise StoreError(f"result store {self.root}: invalid run id {run_id!r}")
        return self.root / RUNS_DIR / run_id

    def _append_run_result(self, run_id: str, data: bytes) -> None:
        folder = self._run_dir(run_id)
        folder.mkdir(parents=True, exist_ok=True)
        # One write() of the whole line on an O_APPEND descriptor: writers in other processes of the
        # same run never interleave inside a line, and a kill leaves at most one torn last line.
        fd = os.open(folder / "results.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, data + b"\n")
        finally:
            os.close(fd)

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
            raise StoreError(f"result store {self.root}: cannot read run {run_id}: {exc}") from exc

    def list_runs(self) -> list[EvalRun]:
        folder = self.root / RUNS_DIR
        if not folder.is_dir():
            return []
        runs = [r for r in (self.get_run(p.name) for p in folder.iterdir() if p.is_dir()) if r is not None]
        return sorted(runs, key=lambda r: (r.started_at, r.id), reverse=True)

    def run_results(self, run_id: str) -> Iterator[TestResult]:
        path = self._run_dir(run_id) / "results.jsonl"
        if not path.is_file():
            return
        # First pass: which line holds the last copy of each key (a retried step stores twice).
        last: dict[ResultKey, int] = {}
        with path.open("rb") as fh:
            for n, line in enumerate(fh):
                try:
                    s = ResultSummary.model_validate_json(line)
                except ValidationError:
                    continue  # the torn last line of a killed run
                last[ResultKey(s.agent, s.suite, s.test_id)] = n
        keep = set(last.values())
        with path.open("rb") as fh:
            for n, line in enumerate(fh):
                if n in keep:
                    yield TestResult.model_validate_json(line)

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
            raise StoreError(
                f"result store {self.root}: {path} is not a valid TestResult: {exc.errors()[0].get('msg', exc)}"
            ) from exc

    def get(self, key: ResultKey) -> TestResult | None:
        return self._read(key, TestResult)

    def get_summaries(self, keys: Iterable[ResultKey]) -> Iterator[ResultSummary]:
        for key in keys:
            summary = self._read(key, ResultSummary)
            if summary is not None:
                yield summary

    def list(self, agent: str | None = None, suite: str | None = None) -> list[ResultKey]:
        if not self.root.is_dir():
            return []
        agents = (
            [self.root / encode_part(agent)]
            if agent
            else [p for p in self.root.iterdir() if p.is_dir() and p.name != RUNS_DIR]
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

    def delete(self, key: ResultKey) -> bool:
        try:
            self.path_for(key).unlink()
            return True
        except FileNotFoundError:
            return False


def default_store(config: Config, settings: StoreSettings | None = None) -> LocalResultStore:
    """A project's local store: the `path` setting (relative to the project root), by default
    `<state dir>/results`."""
    path = (settings or config.store).settings.get("path")
    return LocalResultStore(config.path(str(path)) if path else config.state_path / "results")
