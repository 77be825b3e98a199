"""Helpers every test package shares: free ports, local HTTP servers, and the skip-or-fail rule
for real services. Use these instead of writing another copy."""

from tests.support.http import LocalHTTPServer, QuietHandler
from tests.support.net import free_port, wait_for_port
from tests.support.processes import stop
from tests.support.services import REQUIRE_SERVICES, skip_or_fail

__all__ = ["REQUIRE_SERVICES", "LocalHTTPServer", "QuietHandler", "free_port", "skip_or_fail", "stop", "wait_for_port"]
