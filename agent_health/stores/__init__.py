"""Result stores: one `TestResult` per (agent version, suite, test id), so reruns replace exactly
their own result and readers load only what they need; plus the history of evaluation runs.

Types: `local` (files under the state folder, the default), `s3` (a bucket and prefix, through
boto3) and `opensearch` (an index, through opensearch-py); see docs/deploy.md. Installed packages
add types through the `agent_health.stores` entry points (stores/registry.py, docs/extending.md)."""

from typing import TYPE_CHECKING

from agent_health.backends import check_no_inline_secrets
from agent_health.config import Config
from agent_health.errors import ConfigError
from agent_health.lazy import deferred, lazy_names
from agent_health.model import StoreSettings
from agent_health.stores.base import ResultKey, ResultStore, StoreError
from agent_health.stores.local import LocalResultStore, default_store

# another store type is looked up (entry points, its backend) only when chosen
if TYPE_CHECKING:
    import agent_health.stores.registry as store_registry
    from agent_health.stores.opensearch import OpenSearchResultStore
    from agent_health.stores.s3 import S3ResultStore
    from agent_health.stores.summary import ResultSummary
else:
    store_registry = deferred("agent_health.stores.registry")


# the shared backends load when chosen (a run on local files never imports the S3 summary log), and
# summaries when read (a run only writes)
_LAZY = {
    "S3ResultStore": "agent_health.stores.s3",
    "OpenSearchResultStore": "agent_health.stores.opensearch",
    "ResultSummary": "agent_health.stores.summary",
}


__getattr__ = lazy_names(__name__, _LAZY)


__all__ = [
    "LocalResultStore",
    "OpenSearchResultStore",
    "ResultKey",
    "ResultStore",
    "ResultSummary",
    "S3ResultStore",
    "StoreError",
    "default_store",
    "open_store",
]


def open_store(config: Config, settings: StoreSettings | None = None) -> ResultStore:
    """The result store a run uses: `settings` (the run's), else the configuration's `store`.
    Nothing connects yet: the first read or write does (and names the store if it fails)."""
    settings = settings or config.store
    check_no_inline_secrets(settings.settings, "store.settings")
    if settings.type == "local":
        return default_store(config, settings)

    cls = store_registry.REGISTRY.load(settings.type, "store.type")  # imports only the chosen backend
    if not (isinstance(cls, type) and issubclass(cls, ResultStore)):
        raise ConfigError(
            f"store.type {settings.type!r} ({store_registry.REGISTRY.target(settings.type)}) is not a subclass of "
            "agent_health.stores.base.ResultStore"
        )
    store: ResultStore = cls(settings.settings)  # type: ignore[call-arg]  # the contract: cls(settings)
    return store
