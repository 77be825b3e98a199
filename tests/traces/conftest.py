"""Fixtures for the trace tests: a real single-node OpenSearch (2.19, from Maven Central jars) on
127.0.0.1, shared by the session; it skips when Java or Maven is missing, and fails instead when
AGENT_HEALTH_REQUIRE_SERVICES=1 (CI)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "services" / "opensearch"
OPENSEARCH_VERSION = "2.19.6"


def skip_or_fail(reason: str) -> None:
    """Skip with the reason, or fail when CI requires real services."""
    if os.environ.get("AGENT_HEALTH_REQUIRE_SERVICES") == "1":
        pytest.fail(f"required service unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _built() -> bool:
    lib = NODE_DIR / "target" / "lib"
    return (NODE_DIR / "target" / "classes" / "Launcher.class").exists() and \
        (lib / f"opensearch-{OPENSEARCH_VERSION}.jar").exists()


def _build(mvn: str) -> None:
    """Compile the launcher and copy the server jars (a no-op when already done; the first run
    downloads them from Maven Central into ~/.m2)."""
    if _built():
        return
    proc = subprocess.run([mvn, "-q", "-B", "-f", str(NODE_DIR / "pom.xml"), "compile",
                           "dependency:copy-dependencies"], capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0 or not _built():
        skip_or_fail(f"could not build the OpenSearch test node with Maven (exit {proc.returncode}): "
                     f"{(proc.stdout + proc.stderr)[-2000:]}")


@pytest.fixture(scope="session")
def opensearch_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a running single-node OpenSearch, green, on a free port of 127.0.0.1."""
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if not java:
        skip_or_fail("java is not installed (needed to run the OpenSearch test node)")
    if not mvn:
        skip_or_fail("mvn is not installed (needed to fetch the OpenSearch jars from Maven Central)")
    _build(mvn)  # type: ignore[arg-type]
    home = tmp_path_factory.mktemp("opensearch")
    port = free_port()
    classpath = f"{NODE_DIR / 'target' / 'classes'}{os.pathsep}{NODE_DIR / 'target' / 'lib' / '*'}"
    log = (home / "node.log").open("w")
    proc = subprocess.Popen([java, "-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-cp", classpath, "Launcher",
                             str(home / "node"), str(port)], stdin=subprocess.PIPE, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                log.flush()
                skip_or_fail(f"OpenSearch test node exited with {proc.returncode}: "
                             f"{(home / 'node.log').read_text()[-2000:]}")
            try:
                r = httpx.get(f"{url}/_cluster/health", params={"wait_for_status": "green", "timeout": "1s"},
                              timeout=3)
                if r.status_code == 200 and r.json().get("status") == "green":
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                skip_or_fail(f"OpenSearch test node on {url} not green within 120s: "
                             f"{(home / 'node.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        if proc.stdin:
            proc.stdin.close()  # the launcher exits when its stdin closes
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
