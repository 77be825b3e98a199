"""Shared storage backends: S3 buckets (boto3) and OpenSearch indices (opensearch-py).

The result stores, the judge cache and the replay recordings all live on these, so one
configured store (`store=...` in the configuration) can hold all three for every worker of a
team deployment. Credentials come only from the environment (the AWS chain, `password_env`).
"""

from agent_health.backends.opensearch import OpenSearchIndex, doc_id
from agent_health.backends.s3 import S3Bucket
from agent_health.backends.shared import SHARED_SETTING, check_no_inline_secrets, is_shared

__all__ = ["SHARED_SETTING", "OpenSearchIndex", "S3Bucket", "check_no_inline_secrets", "doc_id", "is_shared"]
