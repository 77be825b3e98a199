"""A CLI run resolves each agent version once (`AgentSpec.resolve`: its connector and merged
settings) and passes the result down: to the budget's price check, the connector, the settings
fingerprint in each result's provenance. Checking a reference (`--agent demo`) does not resolve it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from agent_health import load_config
from agent_health.config.fingerprints import agent_settings_hash
from agent_health.stores import LocalResultStore

from ..conftest import ROOT

# The real CLI in a process of its own, with AgentSpec.resolve counted per agent version.
COUNTED_RUN = """
import atexit, collections, json, runpy, sys
from agent_health import AgentSpec

calls = collections.Counter()
resolve = AgentSpec.resolve

def counted(self, version=None):
    agent = resolve(self, version)
    calls[agent.ref] += 1
    return agent

AgentSpec.resolve = counted
atexit.register(lambda: print("RESOLVED " + json.dumps(calls), file=sys.stderr))
sys.argv = ["agent-health", *sys.argv[1:]]
runpy.run_module("agent_health", run_name="__main__")
"""


def counted_run(cwd, *args: str) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", COUNTED_RUN, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(x for x in reversed(out.stderr.splitlines()) if x.startswith("RESOLVED "))
    return json.loads(line.removeprefix("RESOLVED "))


EVAL = """
from agent_health import test, expect

@test("answers", prompt="Why is checkout down?")
async def answers(agent):
    result = await agent.run()
    expect(result.output).to_match(r"\\w")
"""


def test_a_cli_run_resolves_each_agent_version_once(write_eval, tmp_path):
    write_eval("one.eval.py", EVAL)
    # two versions, one named by its key alone; a budget in USD checks every agent's model price
    counts = counted_run(tmp_path, "run", "evals", "--agent", "demo", "--agent", "demo@v1", "--max-cost", "5")
    assert counts == {"demo@v2": 1, "demo@v1": 1}
    # each result's provenance holds the fingerprint of the agent version as configured
    config = load_config(cwd=tmp_path)
    stored = LocalResultStore(config.state_path / "results").load()
    assert {r.agent: r.provenance.agent_settings_hash for r in stored if r.provenance} == {
        ref: agent_settings_hash(config, ref) for ref in ("demo@v1", "demo@v2")
    }


def test_the_default_agent_is_resolved_once_too(write_eval, tmp_path):
    write_eval("one.eval.py", EVAL)
    assert counted_run(tmp_path, "run", "evals", "--no-store") == {"demo@v2": 1}
