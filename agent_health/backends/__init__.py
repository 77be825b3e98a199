"""Shared storage backends: S3 buckets (boto3) and OpenSearch indices (opensearch-py).

The result stores, the judge cache and the replay recordings all live on these, so one
configured store (`store=...` in the configuration) can hold all three for every worker of a
team deployment. Credentials come only from the environment (the AWS chain, `password_env`).
"""

from typing import TYPE_CHECKING, Any

from agent_health.backends.shared import SHARED_SETTING, check_no_inline_secrets, is_shared

if TYPE_CHECKING:
    from agent_health.backends.opensearch import OpenSearchIndex, doc_id
    from agent_health.backends.s3 import S3Bucket

# boto3's and opensearch-py's wrappers load when a shared store is chosen: a run on local files
# (the default) never imports them
_LAZY = {
    "OpenSearchIndex": "agent_health.backends.opensearch",
    "doc_id": "agent_health.backends.opensearch",
    "S3Bucket": "agent_health.backends.s3",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agent_health.backends' has no attribute {name!r}")


__all__ = ["SHARED_SETTING", "OpenSearchIndex", "S3Bucket", "check_no_inline_secrets", "doc_id", "is_shared"]
