"""Build and run the single-node OpenSearch of this folder (used by the trace tests' fixture and by
benchmarks/traces_opensearch.py).

    python tests/services/opensearch/node.py      # runs a node until Ctrl-C, prints its URL
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
if str(HERE.parents[2]) not in sys.path:  # run as a script (python tests/services/opensearch/node.py)
    sys.path.insert(0, str(HERE.parents[2]))

from tests.support.net import free_port  # noqa: E402

OPENSEARCH_VERSION = "2.19.6"
PREFETCH = f"mvn -q -B -f {HERE.relative_to(HERE.parents[2]) / 'pom.xml'} compile dependency:copy-dependencies"


class NodeUnavailable(RuntimeError):
    """Java or Maven is missing, the build failed, or the node did not turn green."""


def built() -> bool:
    lib = HERE / "target" / "lib"
    return (HERE / "target" / "classes" / "Launcher.class").exists() and (
        lib / f"opensearch-{OPENSEARCH_VERSION}.jar"
    ).exists()


def build() -> None:
    """Compile the launcher and copy the jars (the first run downloads them into ~/.m2)."""
    if built():
        return
    mvn = shutil.which("mvn")
    if not mvn:
        raise NodeUnavailable("mvn is not installed (needed to fetch the OpenSearch jars from Maven Central)")
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(HERE / "pom.xml"), "compile", "dependency:copy-dependencies"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if proc.returncode != 0 or not built():
        raise NodeUnavailable(
            f"could not build the OpenSearch test node with Maven (exit {proc.returncode}): "
            f"{(proc.stdout + proc.stderr)[-2000:]}"
        )


@contextlib.contextmanager
def running_node(home: str | os.PathLike[str] | None = None, timeout_s: float = 120) -> Iterator[str]:
    """A green single-node OpenSearch on 127.0.0.1 (free port); yields its URL, stops it after."""
    java = shutil.which("java")
    if not java:
        raise NodeUnavailable("java is not installed (needed to run the OpenSearch test node)")
    build()
    with contextlib.ExitStack() as stack:
        if home is None:
            home = stack.enter_context(tempfile.TemporaryDirectory(prefix="agent-health-opensearch-"))
        home = Path(home)
        port = free_port()
        classpath = f"{HERE / 'target' / 'classes'}{os.pathsep}{HERE / 'target' / 'lib' / '*'}"
        log_path = home / "node.log"
        log = stack.enter_context(log_path.open("w"))
        proc = subprocess.Popen(
            [
                java,
                "-Xms256m",
                "-Xmx512m",
                "-XX:+UseSerialGC",
                "-cp",
                classpath,
                "Launcher",
                str(home / "node"),
                str(port),
            ],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    log.flush()
                    raise NodeUnavailable(
                        f"OpenSearch test node exited with {proc.returncode}: {log_path.read_text()[-2000:]}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    r = httpx.get(
                        f"{url}/_cluster/health", params={"wait_for_status": "green", "timeout": "1s"}, timeout=3
                    )
                    if r.status_code == 200 and r.json().get("status") == "green":
                        break
                if time.monotonic() > deadline:
                    raise NodeUnavailable(
                        f"OpenSearch test node on {url} not green within {timeout_s:g}s: {log_path.read_text()[-2000:]}"
                    )
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


if __name__ == "__main__":
    with running_node() as node_url:
        print(node_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
