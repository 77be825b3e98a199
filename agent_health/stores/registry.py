"""The result store registry: `store.type` (and `--store`, `$AGENT_HEALTH_STORE`) names a kind here.

A kind's target is a `stores.base.ResultStore` subclass, built as `cls(settings)` from the store's
`settings` mapping (the built-in `local` store is built from the project instead: its path is
relative to the project root). The judge cache and recordings of a run on an installed package's
store stay in local files. Third-party kinds come from the `agent_health.stores` entry points.
"""

from agent_health.registry import Registry

REGISTRY = Registry(
    "result store",
    "agent_health.stores",
    {
        "local": "agent_health.stores.local:LocalResultStore",
        "s3": "agent_health.stores.s3:S3ResultStore",
        "opensearch": "agent_health.stores.opensearch:OpenSearchResultStore",
    },
)

__all__ = ["REGISTRY"]
