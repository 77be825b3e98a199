"""Smoke test: the webserver loads the code location from a workspace file on a free local
port, and its GraphQL API shows the asset graph and the registered partitions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import free_port, skip_or_fail

pytestmark = pytest.mark.filterwarnings("ignore")

ROOT = Path(__file__).resolve().parents[2]
QUERY = """{
  assetNodes { assetKey { path } groupName partitionDefinition { type dimensionTypes { name
    dynamicPartitionsDefinitionName } } }
  assetNodeOrError(assetKey: {path: ["rca", "payments", "results"]}) {
    ... on AssetNode { partitionKeysByDimension { name partitionKeys } } }
}"""


def graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def wait_until_up(proc: subprocess.Popen, port: int, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"webserver exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"webserver did not answer on port {port} within {timeout}s:\n{log.read_text()[-3000:]}")


def test_webserver_serves_asset_graph_and_partitions(make_pipeline, project_dir, tmp_path):
    exe = shutil.which("dagster-webserver", path=str(Path(sys.executable).parent))
    if exe is None:
        skip_or_fail("dagster-webserver is not installed next to the Python interpreter")
    home = tmp_path / "home"
    home.mkdir()
    from definitions.headless import instance_yaml

    (home / "dagster.yaml").write_text(instance_yaml())
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "AGENT_HEALTH_CONFIG": str(project_dir / "agent_health_config.py"),
        "PYTHONPATH": str(ROOT),
    }

    # register partitions in that instance the way the headless job does
    from dagster import DagsterInstance

    from definitions.headless import register

    with DagsterInstance.from_config(str(home)) as instance:
        register(instance, make_pipeline())

    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        (ROOT / "workspace.yaml").read_text().replace("working_directory: .", f"working_directory: {ROOT}")
    )
    port = free_port()
    log = tmp_path / "webserver.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [exe, "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)],
            cwd=project_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_up(proc, port, log)
        data = graphql(port, QUERY)
        assert "errors" not in data, data
        nodes = {"/".join(n["assetKey"]["path"]): n for n in data["data"]["assetNodes"]}
        assert {
            "rca/payments/cases",
            "rca/payments/results",
            "rca/payments/rollup",
            "smoke_checks/results",
            "benchmark/leaderboard",
            "benchmark/comparison",
        } <= set(nodes)
        results = nodes["rca/payments/results"]
        assert results["groupName"] == "suite_rca__payments"
        dims = {
            d["name"]: d["dynamicPartitionsDefinitionName"] for d in results["partitionDefinition"]["dimensionTypes"]
        }
        assert dims == {"agent": "agent_versions", "test": "tests__rca__payments"}
        keys = {d["name"]: d["partitionKeys"] for d in data["data"]["assetNodeOrError"]["partitionKeysByDimension"]}
        assert keys == {
            "agent": ["demo@v1", "demo@v2"],
            "test": ["rca/payments::payment-rca-finds-the-database", "rca/payments::checkout-latency"],
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_dagster_definitions_validate_passes_from_the_root(project_dir):
    exe = shutil.which("dagster", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the dagster CLI is not installed next to the Python interpreter")
    env = {**os.environ, "AGENT_HEALTH_CONFIG": str(project_dir / "agent_health_config.py"), "PYTHONPATH": str(ROOT)}
    env.pop("DAGSTER_HOME", None)
    proc = subprocess.run(
        [exe, "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Validation successful" in proc.stdout + proc.stderr
