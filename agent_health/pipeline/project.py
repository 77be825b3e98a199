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
from agent_health.loader import LoadResult, load_tests, merge_loaded
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
    _sources: dict[str, tuple[str, ...]] | None = field(default=None, repr=False)
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

    def suite_sources(self, refresh: bool = False) -> dict[str, tuple[str, ...]]:
        """Suite name -> every eval file of the suite, relative to the eval root, sorted, without
        importing any file. Files that differ only in their extension (`one.eval.py`, `one.yaml`)
        are one suite, as `agent-health run` loads them: every one of them is the suite's."""
        if self._sources is None or refresh:
            sources: dict[str, list[str]] = {}
            if self.eval_root.is_dir():
                paths, _ = discover([self.eval_root])
                for path in paths:
                    rel = path.relative_to(self.eval_root).as_posix()
                    sources.setdefault(suite_name(rel), []).append(rel)
            self._sources = {suite: tuple(rels) for suite, rels in sources.items()}
            self._files = {suite: rels[0] for suite, rels in self._sources.items()}
        return self._sources

    def suite_files(self, refresh: bool = False) -> dict[str, str]:
        """Suite name -> its first eval file (`suite_sources` has all of them): the file that
        names the suite in descriptions and code references."""
        if self._files is None or refresh:
            self.suite_sources(refresh)
        return self._files or {}

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
        """Load one suite's eval files, as `agent-health run` loads them (a test id that two of
        them define is a load error naming both, and neither test is kept); errors name the file
        (and the test)."""
        rels = self.suite_sources().get(suite) or self.suite_sources(refresh=True).get(suite)
        if rels is None:
            raise ConfigError(f"suite {suite!r} has no eval file under {self.eval_root}")
        if len(rels) == 1:
            return self._load_file(rels[0])
        return merge_loaded((self._load_file(rel) for rel in rels), str(self.eval_root))

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
        """Every eval file under the eval root (a missing root loads nothing), as `agent-health
        run` loads them; unchanged files come from the cache."""
        rels = [rel for files in self.suite_sources(refresh=True).values() for rel in files]
        out = merge_loaded((self._load_file(rel) for rel in rels), str(self.eval_root))
        with self._lock:  # forget files that are gone
            for rel in set(self._loaded) - set(rels):
                del self._loaded[rel]
        return out


_CACHE: dict[tuple[str | None, ...], tuple[FileStamp, Project]] = {}
_CACHE_LOCK = threading.Lock()


def clear_project_cache() -> None:
    """Forget every loaded project (tests that rewrite a configuration within one clock tick)."""
    with _CACHE_LOCK:
        _CACHE.clear()
