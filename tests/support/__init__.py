"""Helpers every test package shares: free ports, local HTTP servers, the skip-or-fail rule for
real services, and time limits scaled to the machine. Use these instead of writing another copy."""

from tests.support.http import LocalHTTPServer, QuietHandler
from tests.support.net import free_port, wait_for_port
from tests.support.processes import stop
from tests.support.services import REQUIRE_SERVICES, skip_or_fail
from tests.support.timing import machine_factor, scaled

__all__ = [
    "REQUIRE_SERVICES",
    "LocalHTTPServer",
    "QuietHandler",
    "free_port",
    "machine_factor",
    "scaled",
    "skip_or_fail",
    "stop",
    "wait_for_port",
]
