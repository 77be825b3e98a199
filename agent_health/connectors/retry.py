"""Retry policy for HTTP connectors: exponential backoff with full jitter, honouring Retry-After."""

from __future__ import annotations

import email.utils
import random
import time

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model.limits import Backoff, Retries

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class RetryPolicy(BaseModel):
    """How often and how long to wait before retrying a request that never produced output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: Retries = Field(2, description="Retries after the first attempt (0 disables retries).")
    backoff_s: Backoff = Field(0.5, description="Base delay; attempt n waits up to backoff_s * 2**n.")
    max_backoff_s: Backoff = Field(30.0, description="Upper bound of one wait, Retry-After included.")
    statuses: frozenset[int] = Field(RETRY_STATUSES, description="HTTP statuses that are retried.")

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number `attempt` (0-based)."""
        hinted = parse_retry_after(retry_after)
        if hinted is not None:
            return min(hinted, self.max_backoff_s)
        # Full jitter: spreads retries of many concurrent tests instead of synchronizing them.
        return random.uniform(0, min(self.max_backoff_s, self.backoff_s * (2**attempt)))


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
