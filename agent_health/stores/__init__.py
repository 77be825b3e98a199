"""Result stores: one `TestResult` per (agent version, suite, test id), so reruns replace exactly
their own result and readers load only what they need; plus the history of evaluation runs."""

from agent_health.config import Config
from agent_health.errors import ConfigError
from agent_health.model import StoreSettings
from agent_health.stores.base import ResultKey, ResultStore, StoreError
from agent_health.stores.local import LocalResultStore, default_store
from agent_health.stores.summary import ResultSummary

__all__ = [
    "LocalResultStore",
    "ResultKey",
    "ResultStore",
    "ResultSummary",
    "StoreError",
    "default_store",
    "open_store",
]


def open_store(config: Config, settings: StoreSettings | None = None) -> ResultStore:
    """The result store a run uses: `settings` (the run's), else the configuration's `store`."""
    settings = settings or config.store
    if settings.type == "local":
        return default_store(config, settings)
    raise ConfigError(f"store.type {settings.type!r} is not available yet; use local")
