"""Spend nobody counted was counted as free: an agent that reports no usage got `cost_usd 0.0` and
0 tokens, so `--max-cost 0.000001` never stopped it ("cost $0.0000 of $1e-06"), and the tokens of
judge calls whose verdict ended errored (an answer unusable after its repair) counted as 0. Now an
agent run that reports no usage has unknown tokens and an unknown cost: the summary says so, and a
budget stops the run after it (docs/budgets.md) instead of counting it as nothing; an errored
verdict carries the usage of the calls that were made."""

from __future__ import annotations

import json
import textwrap

import pytest

from agent_health import define_config, load_tests, run_tests
from tests.judges.helpers import ScriptedServer, chat
from tests.support.cli import cli_in_process

SILENT = """
def run(prompt):
    return "The payment service cannot reach its database."


def counted(prompt):
    answer = "The payment service cannot reach its database."
    return {"output": answer, "usage": {"input_tokens": 0, "output_tokens": 0}}
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[
        {"key": "silent", "connector": "python", "settings": {"function": "silent_agent:run"}, "versions": {"v1": {}}},
        {"key": "counted", "connector": "python", "settings": {"function": "silent_agent:counted"},
         "versions": {"v1": {}}},
    ],
    default_agent="silent@v1",
)
"""

CASES = "tests:\n" + "".join(f"  - name: outage {i}\n    prompt: Diagnose outage {i}.\n" for i in range(4))


@pytest.fixture
def project(tmp_path, evals):
    (tmp_path / "silent_agent.py").write_text(textwrap.dedent(SILENT))
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    evals("outages.yaml", CASES)
    return tmp_path


@pytest.mark.parametrize(
    ("limit", "reason"),
    [
        (("--max-cost", "0.000001"), "cost unknown: the agent reported no usage (test outages::outage-0)"),
        (("--max-tokens", "1000"), "tokens unknown: the agent reported no usage (test outages::outage-0)"),
    ],
)
def test_a_budget_stops_after_an_agent_run_that_reported_no_usage(project, limit, reason):
    proc = cli_in_process("run", "evals", "--no-judge", *limit, "--reporter", "json=report.json", cwd=project)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    report = json.loads((project / "report.json").read_text())
    assert [r["name"] for r in report["results"]] == ["outage 0"]  # the first test ran, the rest did not
    assert report["not_run"] == 3 and report["budget"]["reached"] == reason, report["budget"]
    [result] = report["results"]
    assert result["cost_usd"] is None and result["usage"]["unreported"] is True  # unknown, not $0
    assert "unknown for 1 agent run(s) that reported no usage" in out and "unknown for 1 result(s)" in out, out


def test_without_a_budget_the_summary_says_the_spend_is_unknown_and_a_reported_zero_is_zero(project):
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=report.json", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [summary] = json.loads((project / "report.json").read_text())["summaries"]
    assert (summary["unreported"], summary["unpriced"], summary["cost_usd"]) == (4, 4, 0.0)
    assert "unknown for 4 agent run(s) that reported no usage" in proc.stdout, proc.stdout
    # an agent that says it used no tokens (no model called) costs nothing, and a budget lets it run
    said = cli_in_process("run", "evals", "--no-judge", "--agent", "counted@v1", "--max-cost", "0.000001", cwd=project)
    assert said.returncode == 0 and "unknown" not in said.stdout, said.stdout + said.stderr


ONE_JUDGED = """
from agent_health import test


@test("judged", prompt="Diagnose why the payment service is failing.")
async def judged(agent, judge):
    await judge(await agent.run(), "names the failing dependency")
"""


def test_the_tokens_of_judge_calls_that_ended_in_an_errored_verdict_are_counted(tmp_path, evals):
    """The judge answered twice without a score (the first answer and its repair): the verdict is
    errored, and both calls' 2 x 120 tokens count in the result, its cost and the summary."""
    server = ScriptedServer()
    server.default = lambda rec: chat(json.dumps({"pass": True, "reasoning": "fine"}), usage=(100, 20))
    try:
        config = define_config(
            root=str(tmp_path),
            judge={"provider": "openai", "model": "judge-model", "cache": False,
                   "settings": {"base_url": server.url + "/v1"}, "backoff_s": 0.01},
            prices={"judge-model": (1.0, 2.0)},
        )  # fmt: skip
        evals("judged.eval.py", ONE_JUDGED)
        [result] = run_tests(load_tests([tmp_path / "evals"]).tests, config, "demo@v2")
    finally:
        server.close()
    assert len(server.posts()) == 2
    assert result.status == "errored" and "judge answer unusable after one repair attempt" in (result.error or "")
    assert result.judge_usage.total_tokens == 240 and result.judge_usage.input_tokens == 200
    assert result.judge_cost_usd == pytest.approx((200 * 1.0 + 40 * 2.0) / 1_000_000)
