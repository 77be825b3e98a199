"""What newer results carry reaches the partition a person clicks in Dagster: the named judges and
matchers of the judge kit (one verdict per criterion, `to_satisfy_judge`, `ToolCallJudge`), the
judges' share of the cost, and the files the agent produced, on each results partition's
materialization, through the evaluation job on a temporary SQLite instance."""

from __future__ import annotations

import pytest
from dagster import AssetKey

from agent_health_dagster.defs.partitions import multi_key
from agent_health_dagster.headless import register
from tests.dagster.test_dagster_pipeline import evaluate, outcomes

pytestmark = pytest.mark.filterwarnings("ignore")

AGENT = """
def answer(prompt):
    return {
        "output": "The payment service cannot reach its database db-primary.",
        "steps": [{"kind": "tool_call", "tool": "search_logs", "args": {"service": "payment"}}],
        "artifacts": [{"name": "rca.md", "content": "# RCA\\nThe database is unreachable."}],
    }
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{"key": "py", "connector": "python", "settings": {"function": "kit_agent:answer"},
             "versions": {"v1": {}}}],
)
"""

EVAL = """
from agent_health import test, expect, ToolCallJudge

@test("kit judged", prompt="Diagnose why the payment service is failing.")
async def kit(agent, judge):
    result = await agent.run()
    await judge(result, ["mentions the database", "names the payment service"])
    await expect(result).to_satisfy_judge(ToolCallJudge(expected=["search_logs"]))

@test("kit fails", prompt="Diagnose why the payment service is failing.")
async def kit_fails(agent, judge):
    result = await agent.run()
    await expect(result).to_satisfy_judge(ToolCallJudge(expected=["get_metrics"]))
"""


@pytest.fixture
def kit_project(tmp_path):
    (tmp_path / "kit_agent.py").write_text(AGENT)
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "kit.eval.py").write_text(EVAL)
    return tmp_path


def test_results_partitions_show_judge_kit_verdicts_and_the_agents_files(kit_project, instance):
    from agent_health_dagster.defs.build import build_pipeline
    from agent_health_dagster.defs.resources import AgentHealthResource

    pipeline = build_pipeline(AgentHealthResource(config_path=str(kit_project / "agent_health_config.py")))
    register(instance, pipeline)
    evaluate(pipeline, instance, "kit", ["py@v1"])
    meta = outcomes(instance, AssetKey(["kit", "results"]))
    passed = meta[str(multi_key("py@v1", "kit-judged"))]
    assert passed["status"].value == "passed"
    assert passed["judge_verdicts"].value == 3  # two criteria, one verdict each, and the matcher's
    assert passed["artifacts"].value.startswith("rca.md (")
    failed = meta[str(multi_key("py@v1", "kit-fails"))]
    assert failed["status"].value == "failed"
    assert "get_metrics" in failed["failure"].value  # the matcher's reason, on the partition
