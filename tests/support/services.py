"""The rule for tests that need a real service: skip with the reason, or fail when CI demands
every service (`AGENT_HEALTH_REQUIRE_SERVICES=1`, set by .ci/run)."""

from __future__ import annotations

import os

import pytest

REQUIRE_SERVICES = os.environ.get("AGENT_HEALTH_REQUIRE_SERVICES") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip a test whose service cannot start, unless CI demands the service (then fail)."""
    if REQUIRE_SERVICES:
        pytest.fail(f"required service unavailable (AGENT_HEALTH_REQUIRE_SERVICES=1): {reason}", pytrace=False)
    pytest.skip(reason)
