"""Shared helpers of the fault tests: the CLI and short Python scripts as real processes (so a
crash, an exit code or a umask is the process's own), and eval files written as bytes. A case whose
subject is only the CLI's message, exit code or files runs it in-process instead
(`tests.support.cli.cli_in_process`): the same entry, without a new interpreter per case."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def process_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(extra or {})}
    env.pop("AGENT_HEALTH_CONFIG", None)
    return env


def _agent_health(args: tuple[str, ...], cwd: Path, env: dict[str, str] | None, timeout: float, **kw: Any) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "agent_health", *args],
        cwd=cwd,
        env=process_env(env),
        capture_output=True,
        timeout=timeout,
        **kw,
    )


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, umask: int = -1, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`agent-health ARGS` in its own process (with `umask` when given). Output that is not UTF-8
    shows as backslash escapes instead of breaking the test."""
    return _agent_health(args, cwd, env, timeout, text=True, errors="backslashreplace", umask=umask)


def cli_bytes(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> bytes:
    """The raw standard output of `agent-health ARGS` (for output that must be checked byte for byte)."""
    return _agent_health(args, cwd, env, timeout).stdout


def python(
    script: str, *, cwd: Path, env: dict[str, str] | None = None, umask: int = -1, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """A dedented Python script in its own process."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=cwd,
        env=process_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        umask=umask,
    )


@pytest.fixture
def evals(tmp_path: Path):
    """Write an eval file under tmp_path/evals (text is dedented; bytes are written as they are)."""

    def write(name: str, content: str | bytes) -> Path:
        path = tmp_path / "evals" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip(), encoding="utf-8")
        return path

    return write


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test here is a fault case (but the check of docs/reliability.md's count of them):
    `pytest -m fault --collect-only -q tests/faults` counts them (docs/reliability.md)."""
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.path))
        if here in path.parents and path.name != "test_faults_readme.py":
            item.add_marker(pytest.mark.fault)
