"""A project for the calibration tests: a real REST agent on 127.0.0.1 and a real OpenAI-compatible
judge server (127.0.0.1) whose verdict on each case the test scripts, so it disagrees with the
human labels on known cases."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.judges.helpers import ScriptedServer, chat, strings, verdict_json
from tests.reports.helpers import CountingAgent

CASES = 12
EVAL = f"""
from agent_health import test

def make(i):
    @test(f"case {{i:02d}}", prompt=f"case-{{i:02d}}: why is the payment service failing?")
    async def body(agent, judge):
        result = await agent.run()
        await judge(result, "identifies the database as the cause")
    return body

for i in range({CASES}):
    make(i)
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[
        {{"key": "sre", "connector": "http", "settings": {{"endpoint": {endpoint!r}}}, "versions": {{"v1": {{}}}}}}
    ],
    default_agent="sre@v1",
    judge={judge},
)
"""
_CASE = re.compile(r"case-(\d\d)")


@dataclass
class Judge:
    """The judge server's verdicts: the cases it passes (every other case fails)."""

    server: ScriptedServer
    passes: set[int] = field(default_factory=set)


@dataclass
class CalibProject:
    root: Path
    agent: CountingAgent
    judge: Judge
    judge_settings: dict = field(default_factory=dict)

    @property
    def store_root(self) -> Path:
        return self.root / ".agent_health" / "results"

    def configure(self, **judge: object) -> None:
        """Rewrite the configuration with more judge settings (e.g. calibration=...)."""
        settings = {**self.judge_settings, **judge}
        (self.root / "agent_health_config.py").write_text(CONFIG.format(endpoint=self.agent.url, judge=repr(settings)))

    def write_labels(self, rows: list[dict], name: str = "labels.jsonl") -> Path:
        path = self.root / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path


def case_id(i: int) -> str:
    return f"cases::case-{i:02d}"


@pytest.fixture
def calib_project(tmp_path):
    agent = CountingAgent()
    server = ScriptedServer()
    judge = Judge(server)

    def reply(rec):
        found = [m.group(1) for s in strings(rec.json) for m in _CASE.finditer(s)]
        case = int(found[0]) if found else -1
        passed = case in judge.passes
        why = f"case {case}: the output {'names' if passed else 'does not name'} the database"
        return chat(verdict_json(passed, 0.9 if passed else 0.1, why), model=rec.json["model"])

    server.default = reply
    project = CalibProject(
        tmp_path,
        agent,
        judge,
        {"provider": "openai", "model": "judge-a", "settings": {"base_url": server.url + "/v1"}, "backoff_s": 0.01},
    )
    project.configure()
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "cases.eval.py").write_text(textwrap.dedent(EVAL))
    yield project
    server.close()
    agent.close()
