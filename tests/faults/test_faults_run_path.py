"""Faults on the run path, through the CLI as a user meets them: a report that cannot be written
(a directory, a full disk) for every file reporter, an agent version whose secret is missing next
to one that is fine, an async body that forgets to await agent.run(), and a run killed with
SIGKILL. Each ends with one named cause, exit 2 where the user must act, and nothing lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_health.stores import LocalResultStore
from tests.faults.conftest import ROOT, cli, process_env

PASSING = """
from agent_health import test, expect

for i in range(3):
    @test(f"t{i}")
    def t():
        expect(1).to_equal(1)
"""


def stored(tmp_path: Path) -> int:
    store = LocalResultStore(tmp_path / ".agent_health" / "results")
    return len(store.list())


@pytest.mark.parametrize("reporter", ["json", "jsonl", "junit", "html"])
@pytest.mark.parametrize("target", ["directory", "full disk"])
def test_a_report_that_cannot_be_written_exits_2_and_the_results_stay_stored(reporter, target, evals, tmp_path):
    if target == "full disk" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")  # a Linux device; the directory case still runs
    evals("ok.eval.py", PASSING)
    path = str(tmp_path / "reports") if target == "directory" else "/dev/full"
    (tmp_path / "reports").mkdir()
    p = cli("run", "evals", "--reporter", f"{reporter}={path}", cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert f"{path}" in p.stderr and reporter in p.stderr  # names the reporter and the file
    assert stored(tmp_path) == 3


MISSING_SECRET = """
from agent_health import define_config

config = define_config(agents=[{
    "key": "py", "connector": "python",
    "settings": {"function": "fine_agent:answer"},
    "versions": {"v1": {}, "v2": {"kwargs": {"token": {"env": "AH_FAULT_MISSING_TOKEN"}}}},
}])
"""


def test_a_second_agent_with_a_missing_secret_stops_the_run_before_anything_runs(evals, tmp_path):
    evals(
        "one.eval.py",
        "from agent_health import test\n@test('t', prompt='hi')\nasync def t(agent):\n    await agent.run()\n",
    )
    (tmp_path / "agent_health_config.py").write_text(MISSING_SECRET)
    (tmp_path / "fine_agent.py").write_text(
        "from pathlib import Path\n\ndef answer(prompt, token=None):\n"
        "    Path(__file__).with_name('ran').write_text(prompt)\n    return 'ok'\n"
    )
    os.environ.pop("AH_FAULT_MISSING_TOKEN", None)
    p = cli("run", "evals", "--agent", "py@v1", "--agent", "py@v2", cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "AH_FAULT_MISSING_TOKEN" in p.stderr and "agents.py" in p.stderr
    assert not (tmp_path / "ran").exists() and stored(tmp_path) == 0


def test_an_async_body_that_never_awaits_agent_run_is_errored_saying_so(evals, tmp_path):
    evals(
        "u.eval.py",
        """
        from agent_health import test

        @test("forgot await", prompt="payment service failing")
        async def forgot(agent):
            agent.run()
        """,
    )
    p = cli("run", "evals", "--reporter", "json=r.json", cwd=tmp_path)
    assert p.returncode == 1
    [result] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert result["status"] == "errored" and "never awaited" in result["error"]


SLOW = """
import time
from agent_health import test

for i in range(40):
    @test(f"slow {i:02d}")
    def slow():
        time.sleep(0.1)
"""


def test_a_run_killed_with_sigkill_keeps_its_results_and_any_earlier_report(evals, tmp_path):
    evals("slow.eval.py", SLOW)
    (tmp_path / "r.json").write_text('{"an": "earlier report"}')
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_health", "run", "evals", "--concurrency", "2", "--reporter", "json=r.json"],
        cwd=tmp_path,
        env=process_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while stored(tmp_path) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    kept = stored(tmp_path)
    assert 4 <= kept < 40  # killed mid-run, every finished result kept
    assert json.loads((tmp_path / "r.json").read_text()) == {"an": "earlier report"}  # never half a report
    store = LocalResultStore(tmp_path / ".agent_health" / "results")
    [run] = store.list_runs()
    assert run.status == "running" and len(list(store.run_results(run.id))) >= kept - 1
    assert ROOT  # the CLI under test is this checkout's
