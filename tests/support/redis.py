"""pytest plugin: a real Redis from Debian's `redis-server` package on a free port of 127.0.0.1
(no persistence, under a temporary folder), started once per session: the broker of the Celery
route (docs/deploy.md). A missing binary skips (CI: fails) with the reason."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.net import free_port, wait_for_port
from tests.support.processes import stop
from tests.support.services import skip_or_fail


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """`redis://127.0.0.1:<port>` of a running Redis for the session (databases 0-15 empty)."""
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(exe).exists():
        skip_or_fail("redis-server not found (apt-get install redis-server)")
    folder = Path(tempfile.mkdtemp(prefix="ah-redis-"))
    port = free_port()
    # its log goes to a file: a pipe nobody reads would fill and block it
    cmd = [exe, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    cmd += ["--dir", str(folder), "--logfile", str(folder / "redis.log")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for_port(port, timeout=20):
            log = folder / "redis.log"
            skip_or_fail(f"redis-server did not start: {log.read_text()[-1000:] if log.exists() else ''}")
        yield f"redis://127.0.0.1:{port}"
    finally:
        stop(proc)
        shutil.rmtree(folder, ignore_errors=True)
