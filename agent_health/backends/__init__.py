"""Shared storage backends: S3 buckets (boto3) and OpenSearch indices (opensearch-py).

The result stores, the judge cache and the replay recordings all live on these, so one
configured store (`store=...` in the configuration) can hold all three for every worker of a
team deployment. Credentials come only from the environment (the AWS chain, `password_env`).
"""

from typing import TYPE_CHECKING

from agent_health.backends.shared import SHARED_SETTING, check_no_inline_secrets, is_shared
from agent_health.lazy import lazy_names

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


__getattr__ = lazy_names(__name__, _LAZY)


__all__ = ["SHARED_SETTING", "OpenSearchIndex", "S3Bucket", "check_no_inline_secrets", "doc_id", "is_shared"]
