"""A small eval folder for tests of the pipeline and the analysis (written into a tmp dir)."""

from __future__ import annotations

import json
from pathlib import Path

RCA = """
from agent_health import test, expect

@test("payment RCA finds the database", labels=["category:RCA", "difficulty:Hard"],
      prompt="Diagnose why the payment service is failing.",
      context=[{"description": "Error log", "value": "Connection refused to db-primary:5432"}])
async def payment(agent, judge):
    result = await agent.run()
    expect(result).to_have_called_tool("search_logs")
    await judge(result, "identifies that the payment service cannot reach its database")

@test("checkout latency", labels=["category:RCA"], prompt="Why is checkout slow? p99 latency is up.")
async def checkout(agent):
    result = await agent.run()
    expect(result).to_have_called_tool("query_metrics")
"""

SMOKE = """
from agent_health import test, expect

@test("pure data check", labels=["category:smoke"])
def data_only():
    expect(1 + 1).to_equal(2)

@test("always fails", labels=["category:smoke"])
def fails():
    expect("a").to_equal("b")
"""

CASES = {
    "testCases": [
        {
            "id": "tc-1",
            "name": "queue backlog",
            "category": "RCA",
            "difficulty": "Medium",
            "initialPrompt": "The orders queue is backing up. Find out why.",
            "expectedOutcomes": ["identifies the consumer as the root cause"],
        },
    ]
}


def write_evals(root: Path) -> Path:
    """Create `root/evals` with a nested code suite, a suite with '-' in its name and a JSON suite."""
    evals = root / "evals"
    (evals / "rca").mkdir(parents=True, exist_ok=True)
    (evals / "rca" / "payments.eval.py").write_text(RCA)
    (evals / "smoke-checks.eval.py").write_text(SMOKE)
    (evals / "cases.json").write_text(json.dumps(CASES))
    return evals


def write_config(root: Path) -> Path:
    """An agent_health_config.py with the demo agent and the default eval root."""
    path = root / "agent_health_config.py"
    path.write_text("from agent_health import define_config\nconfig = define_config()\n")
    return path
