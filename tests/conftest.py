"""Shared fixtures. Tests that need a real service start it in their own fixtures; the helpers they
share (ports, HTTP servers, skip-or-fail) live in tests/support; what several test folders use
(OpenSearch, PostgreSQL, S3, Chromium, the reports' demo project) are the plugins below, with the
session-end check that no test left a process behind (tests/support/leftovers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Session-wide real services any test folder may use (each starts once, on first use), and the
# check at the end of the session that no test left a process behind.
pytest_plugins = [
    "tests.support.opensearch",
    "tests.support.postgres",
    "tests.support.redis",
    "tests.support.s3",
    "tests.support.leftovers",
    "tests.support.browser",  # one headless Chromium per test module that asks for it
    "tests.support.report_project",  # the demo project the report and reporter tests read
]


@pytest.fixture(autouse=True)
def _project_modules_leave_with_their_test(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A module a test imported from its temporary project (`my_agents`, the framework agents,
    which read their endpoint when they load) leaves sys.modules with that test: a cached one
    answered for the next test's project of the same name, which then failed or passed by the
    order xdist gave the files."""
    yield
    temp = str(tmp_path_factory.getbasetemp())
    for name, module in list(sys.modules.items()):
        # a namespace package (a folder without __init__.py) has no file, only its folders
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or ()), None)
        if isinstance(where, str) and where.startswith(temp):
            del sys.modules[name]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with slow tests (a real `dagster dev`, deployments on PostgreSQL) run first, so that on
    parallel workers (scripts/test.sh: `-n`) the long ones start at once and the short ones fill the gaps
    around them. Slow tests get the suite's per-test timeout stretched to this machine
    (tests/support/timing.py): on a busy machine they take longer without being wrong. A test's
    own timeout marker, or no timeout at all, stays as it is."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: the order within stays
    slow = [item for item in items if item.get_closest_marker("slow") and not item.get_closest_marker("timeout")]
    if not slow:
        return
    try:
        from pytest_timeout import get_env_settings
    except ImportError:  # pytest-timeout not installed: no per-test timeout to stretch
        return
    timeout = get_env_settings(config).timeout
    if timeout:
        from tests.support.timing import scaled

        for item in slow:
            item.add_marker(pytest.mark.timeout(scaled(timeout)))


@pytest.fixture
def write_eval(tmp_path: Path):
    """Write an eval file (dedented) under tmp_path/evals and return its path."""

    def write(name: str, body: str) -> Path:
        path = tmp_path / "evals" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body).lstrip())
        return path

    return write


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: a separate process."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full_env.pop("AGENT_HEALTH_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "agent_health", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
