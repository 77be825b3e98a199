"""The Dagster commands of README.md, docs/setup.md and docs/dagster.md run as written, in document order, in a
fresh copy of the project (its scripts, eval files and workspace; the tested virtualenv), against
a fresh instance: `bash scripts/main.sh`, the `dagster dev` of scripts/dev.sh (up and serving the
code location), and the commands docs/dagster.md gives for materializing partitions. Each command
ends with the exit code its comment states (`# exits N`), else 0. The library's commands
(`agent-health ...`) are run by tests/reports/test_docs.py and tests/core/test_docs_examples.py;
`bash scripts/test.sh` is this suite (CI runs it through .ci/run)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.core.test_docs_examples import block

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]

EXITS = re.compile(r"#.*\bexits (\d+)")


def commands(code: str) -> list[tuple[str, int]]:
    """The commands of a shell block with the exit code each one's comment states (default 0):
    lines joined while they end in a backslash or leave a single quote open."""
    out: list[tuple[str, int]] = []
    current = ""
    for line in code.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line + "\n"
        if current.rstrip().endswith("\\") or current.count("'") % 2:
            continue
        match = EXITS.search(line)
        out.append((current.strip(), int(match.group(1)) if match else 0))
        current = ""
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A fresh checkout's files the commands use, with the tested virtualenv as its .venv."""
    venv = ROOT / ".venv"
    if not (venv / "bin" / "python").exists():
        pytest.skip("no .venv in the checkout (the scripts create it; run through scripts/test.sh)")
    root = tmp_path_factory.mktemp("fresh")
    for name in ("scripts", "evals", "deploy"):
        shutil.copytree(ROOT / name, root / name)
    for name in ("workspace.yaml", "definitions.py", "pyproject.toml", "constraints.txt"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, root / name)
    (root / ".venv").symlink_to(venv)
    return root


def environment(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HEALTH_", "DAGSTER_"))}
    env["PATH"] = f"{root / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(command: str, root: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_readme_and_dagster_doc_commands_work_as_written(project):
    env = environment(project)
    # README: the main job, on a fresh instance under .agent_health/dagster_home
    main = commands(block("README.md", "bash scripts/main.sh"))[0]
    assert main[0].startswith("bash scripts/main.sh")
    done = run(main[0], project, env)
    assert done.returncode == main[1], done.stdout[-3000:] + done.stderr[-3000:]
    assert "Leaderboard" in done.stdout and "Checks:" in done.stdout
    home = project / ".agent_health" / "dagster_home"
    assert (home / "dagster.yaml").exists()

    # docs/setup.md: the UI on the same instance, as written (it serves on the default port 3000)
    [(dev, _)] = commands(block("setup.md", "DAGSTER_HOME=$PWD/.agent_health/dagster_home"))
    if not port_free(3000):
        pytest.skip("port 3000 is taken on this machine; docs/setup.md's dagster dev command serves there")
    server = subprocess.Popen(
        ["bash", "-c", dev],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, server.stdout.read()[-3000:] if server.stdout else ""
            try:
                query = json.dumps({"query": "{ assetNodes { assetKey { path } } }"}).encode()
                request = urllib.request.Request(
                    "http://127.0.0.1:3000/graphql", data=query, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(request, timeout=10) as answer:
                    nodes = json.loads(answer.read())["data"]["assetNodes"]
                if nodes:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "dagster dev did not serve the code location"
            time.sleep(2)
        assert ["rca", "results"] in [n["assetKey"]["path"] for n in nodes]  # the project's own code location
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()

    # docs/dagster.md: the commands that materialize partitions (the Dagster CLI needs DAGSTER_HOME)
    env = {**env, "DAGSTER_HOME": str(home)}
    for command, code in commands(block("dagster.md", "# every suite, both demo versions")):
        done = run(command, project, env)
        assert done.returncode == code, (command, done.stdout[-3000:] + done.stderr[-3000:])
    from dagster import AssetKey, DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        [latest] = instance.fetch_materializations(AssetKey(["rca", "results"]), limit=1).records
        assert latest.run_id != "" and instance.get_run_by_id(latest.run_id).job_name == "evaluate__rca"


def test_the_command_splitter_reads_exit_codes_continuations_and_quotes():
    code = "# a comment\nfirst --x  # does this; exits 1: because\nsecond \\\n  --y\nthird '{\"a\":\n 1}'\n"
    assert commands(code) == [
        ("first --x  # does this; exits 1: because", 1),
        ("second \\\n  --y", 0),
        ("third '{\"a\":\n 1}'", 0),
    ]
