"""Result stores: one `TestResult` per (agent version, suite, test id), so reruns replace exactly
their own result and readers load only what they need."""

from agent_health.stores.base import ResultKey, ResultStore, StoreError
from agent_health.stores.local import LocalResultStore, default_store
from agent_health.stores.summary import ResultSummary

__all__ = ["LocalResultStore", "ResultKey", "ResultStore", "ResultSummary", "StoreError", "default_store"]
