"""A project for the re-judging tests: a real REST agent on 127.0.0.1 that counts its calls, and a
real OpenAI-compatible judge server whose verdict the test decides (per model, or flipped)."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.judges.helpers import ScriptedServer, chat, verdict_json
from tests.reports.helpers import CountingAgent

EVAL = """
from agent_health import test, expect

@test("payment outage", labels=["category:RCA"], prompt="Diagnose why the payment service is failing.")
async def payment(agent, judge):
    result = await agent.run()
    expect(result).to_have_called_tool("search_logs")
    await judge(result, "identifies that the payment service cannot reach its database")

@test("checkout latency", labels=["category:latency"], prompt="Why is checkout slow?")
async def checkout(agent, judge):
    result = await agent.run()
    await judge(result, "finds the cause of the checkout latency")

@test("pure data check")
def data_only():
    expect(1 + 1).to_equal(2)
"""


@dataclass
class Judge:
    """The judge server's behaviour: models that fail, or every verdict flipped to fail."""

    server: ScriptedServer
    failing_models: set[str] = field(default_factory=set)
    fail_all: bool = False

    def models(self) -> list[str]:
        return [r.json["model"] for r in self.server.posts()]


@dataclass
class RejudgeProject:
    root: Path
    agent: CountingAgent
    judge: Judge

    @property
    def store_root(self) -> Path:
        return self.root / ".agent_health" / "results"

    def write_eval(self, body: str = EVAL) -> None:
        (self.root / "evals").mkdir(exist_ok=True)
        (self.root / "evals" / "rca.eval.py").write_text(textwrap.dedent(body))


CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[
        {{"key": "sre", "connector": "http", "settings": {{"endpoint": {endpoint!r}}}, "versions": {{"v1": {{}}}}}}
    ],
    judge={{"provider": "openai", "model": "judge-a", "settings": {{"base_url": {judge!r}}}, "backoff_s": 0.01}},
)
"""


@pytest.fixture
def rejudge_project(tmp_path):
    agent = CountingAgent()
    server = ScriptedServer()
    judge = Judge(server)

    def reply(rec):
        model = rec.json["model"]
        passed = not judge.fail_all and model not in judge.failing_models
        return chat(verdict_json(passed, 0.9 if passed else 0.2, f"verdict of {model}"), model=model)

    server.default = reply
    (tmp_path / "agent_health_config.py").write_text(CONFIG.format(endpoint=agent.url, judge=server.url + "/v1"))
    project = RejudgeProject(tmp_path, agent, judge)
    project.write_eval()
    yield project
    server.close()
    agent.close()


def report(path: Path) -> dict:
    return json.loads(path.read_text())
