"""The project a pipeline runs: configuration, eval root and result store, found the way the CLI
finds them (`--config`/$AGENT_HEALTH_CONFIG/`agent_health_config.py`), with environment overrides."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from agent_health.config import Config, load_config
from agent_health.errors import ConfigError
from agent_health.loader import LoadResult, load_tests
from agent_health.loader.discover import discover
from agent_health.loader.ids import suite_name
from agent_health.stores import ResultStore, open_store

EVAL_ROOT_ENV = "AGENT_HEALTH_EVAL_ROOT"
STATE_DIR_ENV = "AGENT_HEALTH_STATE_DIR"


@dataclass
class Project:
    """Configuration plus where eval files and results live."""

    config: Config
    store: ResultStore
    _files: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def load(
        cls,
        config_path: str | None = None,
        eval_root: str | None = None,
        state_dir: str | None = None,
        cwd: Path | None = None,
    ) -> Project:
        """Explicit arguments win over $AGENT_HEALTH_EVAL_ROOT / $AGENT_HEALTH_STATE_DIR, which win
        over the configuration file, which wins over the embedded defaults."""
        config = load_config(config_path, cwd)
        updates = {}
        eval_root = eval_root or os.environ.get(EVAL_ROOT_ENV)
        state_dir = state_dir or os.environ.get(STATE_DIR_ENV)
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

    def load_suite(self, suite: str) -> LoadResult:
        """Load one suite's eval file; its errors name the file (and the test)."""
        rel = self.suite_files().get(suite) or self.suite_files(refresh=True).get(suite)
        if rel is None:
            raise ConfigError(f"suite {suite!r} has no eval file under {self.eval_root}")
        return load_tests([self.eval_root / rel], root=self.eval_root)

    def load_all(self) -> LoadResult:
        """Every eval file under the eval root (a missing root loads nothing)."""
        if not self.eval_root.is_dir():
            return LoadResult(root=str(self.eval_root))
        return load_tests([self.eval_root], root=self.eval_root)
