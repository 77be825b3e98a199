"""Secrets never reach the Dagster UI: an agent that echoes its secret environment into its
answer, and fails with it in its error output, leaves no trace of it in any event the instance
stores (materialization metadata, check results, logs) or in the stored results."""

from __future__ import annotations

import sys
import textwrap

import pytest
from dagster import serialize_value

from agent_health_dagster.headless import register
from tests.dagster.test_dagster_pipeline import evaluate

pytestmark = pytest.mark.filterwarnings("ignore")

SECRET = "sk-live-5e5e7c0ffee-do-not-store"

AGENT = """
import json, os, sys
prompt = sys.stdin.read()
token = os.environ["AGENT_TOKEN"]
if "please fail" in prompt:
    print(f"auth backend rejected token {token}", file=sys.stderr)
    sys.exit(2)
print(json.dumps({"answer": f"diagnosis done with token {token}",
                  "tool_calls": [{"name": "search_logs", "arguments": {"auth": token}, "result": token}]}))
"""

EVAL = """
from agent_health import test, expect

@test("echoes", prompt="payment service is failing")
async def echoes(agent):
    r = await agent.run()
    expect(r.output).to_contain("diagnosis done")

@test("fails", prompt="please fail")
async def fails(agent):
    await agent.run()
"""


def test_no_secret_in_dagster_events_or_stored_results(tmp_path, monkeypatch, make_pipeline, instance):
    monkeypatch.setenv("AGENT_TOKEN", SECRET)
    (tmp_path / "agent.py").write_text(textwrap.dedent(AGENT))
    evals = tmp_path / "evals"
    evals.mkdir(exist_ok=True)
    for old in evals.rglob("*"):
        if old.is_file():
            old.unlink()
    (evals / "secret.eval.py").write_text(textwrap.dedent(EVAL))
    (tmp_path / "agent_health_config.py").write_text(
        textwrap.dedent(f"""
        from agent_health import define_config
        config = define_config(
            agents=[{{"key": "sub", "connector": "subprocess",
                      "settings": {{"command": [{sys.executable!r}, {str(tmp_path / "agent.py")!r}],
                                   "env": {{"AGENT_TOKEN": {{"env": "AGENT_TOKEN"}}}}}},
                      "versions": {{"v1": {{}}}}}}],
            default_agent="sub@v1")
    """)
    )
    pipeline = make_pipeline()
    register(instance, pipeline)
    result = evaluate(pipeline, instance, "secret", ["sub@v1"])
    store = pipeline.project.store
    stored = {r.name: r for r in (store.get(k) for k in store.list(suite="secret"))}
    # the agent really had the secret and echoed it: the stored copy shows it redacted
    assert stored["echoes"].status == "passed", stored["echoes"].error
    assert "[REDACTED]" in stored["echoes"].run.output
    assert stored["fails"].status == "errored" and "[REDACTED]" in stored["fails"].error
    blob = "\n".join(serialize_value(e) for e in instance.all_logs(result.run_id))
    assert "sub@v1|fails" in blob and "errored" in blob  # the events do describe these results
    assert SECRET not in blob
    files = "\n".join(p.read_text() for p in (tmp_path / ".agent_health").rglob("*.json*"))  # results in .jsonl
    assert files and SECRET not in files
