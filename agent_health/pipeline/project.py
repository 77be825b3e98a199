"""The project a pipeline runs: configuration, eval root and result store, found the way the CLI
finds them (`--config`/$AGENT_HEALTH_CONFIG/`agent_health_config.py`), with environment overrides.

A long-lived process (the Dagster webserver, daemon and sensors) asks for the project on every
evaluation; it is loaded once per process and reloaded only when its configuration file changes,
and each eval file is imported again only when that file changes."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agent_health.config import Config, deployment_variable, find_config, load_config
from agent_health.errors import AgentHealthError, ConfigError
from agent_health.loader import LoadResult, load_tests
from agent_health.loader.discover import discover
from agent_health.loader.ids import suite_name
from agent_health.pipeline.freshness import Current, current_state
from agent_health.stores import ResultStore, open_store

# the variables declared in agent_health/config/deployment.py; read here alone, not every deployment
# setting, so a command that loads a project fails only on what it uses
EVAL_ROOT_ENV = deployment_variable("eval_root")
STATE_DIR_ENV = deployment_variable("state_dir")

FileStamp = tuple[int, int] | None  # (mtime_ns, size); None when the file is missing


def file_stamp(path: Path | None) -> FileStamp:
    """What tells a changed file from an unchanged one without reading it."""
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


@dataclass
class Project:
    """Configuration plus where eval files and results live."""

    config: Config
    store: ResultStore
    _files: dict[str, str] | None = field(default=None, repr=False)
    _loaded: dict[str, tuple[FileStamp, LoadResult]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(
        cls,
        config_path: str | None = None,
        eval_root: str | None = None,
        state_dir: str | None = None,
        cwd: Path | None = None,
    ) -> Project:
        """Explicit arguments win over $AGENT_HEALTH_EVAL_ROOT / $AGENT_HEALTH_STATE_DIR, which win
        over the configuration file, which wins over the embedded defaults.

        The same arguments give the same Project while the configuration file is unchanged."""
        eval_root = eval_root or os.environ.get(EVAL_ROOT_ENV) or None
        state_dir = state_dir or os.environ.get(STATE_DIR_ENV) or None
        base = (cwd or Path.cwd()).resolve()
        found = find_config(config_path, cwd)
        key = (config_path, eval_root, state_dir, str(base), str(found) if found else None)
        stamp = file_stamp(found)
        with _CACHE_LOCK:
            cached = _CACHE.get(key)
            if cached is not None and cached[0] == stamp:
                return cached[1]
        project = cls._build(config_path, eval_root, state_dir, cwd)
        with _CACHE_LOCK:
            _CACHE[key] = (stamp, project)
        return project

    @classmethod
    def _build(cls, config_path: str | None, eval_root: str | None, state_dir: str | None, cwd: Path | None) -> Project:
        config = load_config(config_path, cwd)
        updates = {}
        if eval_root:
            updates["eval_root"] = eval_root
        if state_dir:
            updates["state_dir"] = state_dir
        if updates:
            config = config.model_copy(update=updates)
        return cls(config=config, store=open_store(config))  # the configured store: local, s3 or opensearch

    @property
    def eval_root(self) -> Path:
        return self.config.path(self.config.eval_root)

    @property
    def config_file(self) -> str:
        """Where agent versions are configured, for messages that say how to add one."""
        return self.config.source or str(Path(self.config.root) / "agent_health_config.py")

    def suite_files(self, refresh: bool = False) -> dict[str, str]:
        """Suite name -> eval file path relative to the eval root, without importing any file."""
        if self._files is None or refresh:
            files: dict[str, str] = {}
            if self.eval_root.is_dir():
                paths, _ = discover([self.eval_root])
                for path in paths:
                    rel = path.relative_to(self.eval_root).as_posix()
                    files.setdefault(suite_name(rel), rel)
            self._files = files
        return self._files

    def _load_file(self, rel: str) -> LoadResult:
        """One eval file's tests, imported again only when the file changed since the last load."""
        path = self.eval_root / rel
        stamp = file_stamp(path)
        with self._lock:
            cached = self._loaded.get(rel)
            if cached is not None and cached[0] == stamp and stamp is not None:
                return cached[1]
            loaded = load_tests([path], root=self.eval_root)
            self._loaded[rel] = (stamp, loaded)
            return loaded

    def load_suite(self, suite: str) -> LoadResult:
        """Load one suite's eval file; its errors name the file (and the test)."""
        rel = self.suite_files().get(suite) or self.suite_files(refresh=True).get(suite)
        if rel is None:
            raise ConfigError(f"suite {suite!r} has no eval file under {self.eval_root}")
        return self._load_file(rel)

    def current_state(self, suites: Iterable[str], agents: Iterable[str]) -> Current:
        """The current test definitions of `suites` and settings of `agents`: what up-to-date
        results were produced from (a suite that fails to load contributes nothing)."""
        tests: list[tuple[str, str]] = []
        for suite in suites:
            try:
                loaded = self.load_suite(suite)
            except AgentHealthError:
                continue
            tests += [(t.id, t.case.content_hash) for t in loaded.tests]
        return current_state(self.config, tests, agents)

    def load_all(self) -> LoadResult:
        """Every eval file under the eval root (a missing root loads nothing); unchanged files
        come from the cache."""
        out = LoadResult(root=str(self.eval_root))
        files = self.suite_files(refresh=True)
        for rel in files.values():
            loaded = self._load_file(rel)
            out.tests.extend(loaded.tests)
            out.errors.extend(loaded.errors)
            out.files.extend(loaded.files)
        with self._lock:  # forget files that are gone
            for rel in set(self._loaded) - set(files.values()):
                del self._loaded[rel]
        return out


_CACHE: dict[tuple[str | None, ...], tuple[FileStamp, Project]] = {}
_CACHE_LOCK = threading.Lock()


def clear_project_cache() -> None:
    """Forget every loaded project (tests that rewrite a configuration within one clock tick)."""
    with _CACHE_LOCK:
        _CACHE.clear()
