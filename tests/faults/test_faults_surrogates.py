"""One lone surrogate in one agent's output (`{"output": "payment \\ud800"}`, a valid JSON escape)
used to lose the whole batch ("3 results could not be stored") and the JSON and HTML reports.
Now every result is stored, on the local, S3 and OpenSearch stores alike, every report is
written, and the surrogate shows as the visible escape `\\ud800` everywhere."""

from __future__ import annotations

import json
import secrets
import xml.etree.ElementTree as ET

import pytest

from agent_health.config import Config
from agent_health.stores import open_store
from tests.faults.lifecycle import budget, manifests
from tests.stores.conftest import new_store_settings
from tests.support.cli import cli_in_process

AGENT = """
import json

def answer(prompt, token=None):
    if "bad" in prompt:
        return json.loads('{"output": "payment \\\\ud800 service"}')  # what an HTTP agent's JSON decodes to
    return {"output": "payment service ok"}
"""

CONFIG = """
from agent_health import define_config

config = define_config(agents=[{{
    "key": "py", "connector": "python", "settings": {{"function": "agent:answer"}},
    "versions": {{"v1": {{{kwargs}}}}},
}}], default_agent="py@v1")
"""

EVALS = """
from agent_health import expect, test

for name, prompt in [("bad", "bad one"), ("good 1", "good one"), ("good 2", "good two")]:
    @test(name, prompt=prompt)
    async def t(agent):
        result = await agent.run()
        expect(result.output).to_contain("payment")
"""

REPORTS = ["json=r.json", "jsonl=r.jsonl", "html=r.html", "junit=r.xml"]


def _run(tmp_path, evals, store: str, kwargs: str = "", env: dict[str, str] | None = None):
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "agent_health_config.py").write_text(CONFIG.format(kwargs=kwargs))
    evals("pay.eval.py", EVALS)
    args = [a for r in REPORTS for a in ("--reporter", r)]
    return cli_in_process("run", "evals", "--store", store, *args, cwd=tmp_path, env=env, timeout=budget(60))


def _check_reports(tmp_path) -> None:
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    outputs = {r["name"]: r["run"]["output"] for r in report["results"]}
    assert outputs["bad"] == "payment \\ud800 service"  # visible escape, the rest of the text kept
    assert len([line for line in (tmp_path / "r.jsonl").read_text().splitlines() if line]) == 4
    assert "payment \\\\ud800 service" in (tmp_path / "r.html").read_text(encoding="utf-8")
    assert len(ET.parse(tmp_path / "r.xml").getroot().findall(".//testcase")) == 3


@pytest.mark.parametrize("kind", ["local", "s3", "opensearch"])
def test_a_lone_surrogate_in_one_output_loses_nothing(kind, request, evals, tmp_path):
    settings = new_store_settings(kind, request, tmp_path)
    p = _run(tmp_path, evals, json.dumps(settings.model_dump()))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "could not be stored" not in p.stderr and "error" not in p.stderr and "Traceback" not in p.stderr
    assert "3 result(s) stored" in p.stderr
    _check_reports(tmp_path)
    store = open_store(Config(root=str(tmp_path)), settings)
    (run,) = store.list_runs()
    assert run.status == "finished"
    stored = {r.name: r for r in store.run_results(run.id)}
    assert sorted(stored) == ["bad", "good 1", "good 2"]
    assert stored["bad"].run is not None and stored["bad"].run.output == "payment \\ud800 service"


def test_a_lone_surrogate_with_a_secret_registered_loses_nothing(evals, tmp_path):
    """With a credential resolved, the engine scrubs each result through its JSON: that used to
    raise on the surrogate and crash the run."""
    token = secrets.token_hex(16)
    p = _run(
        tmp_path,
        evals,
        "local",
        kwargs='"kwargs": {"token": {"env": "AH_SURROGATE_TOKEN"}}',
        env={"AH_SURROGATE_TOKEN": token},
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and "3 result(s) stored" in p.stderr
    _check_reports(tmp_path)
    (run,) = manifests(tmp_path)
    assert run["status"] == "finished"
