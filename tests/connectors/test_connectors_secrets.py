"""End to end through agent_health.session.run_tests: no configured secret reaches any stored
artifact (results JSON, recordings, logs), and a failing agent errors one test while the others go on."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path

from agent_health.config import define_config
from agent_health.loader import load_tests
from agent_health.model import RunSettings
from agent_health.session import run_tests

SECRETS = {"S_TOKEN": "tok-7f3a9c2e-never-store", "S_QUERY_KEY": "qk-55aa11bb", "S_SUB": "sub-91c0ffee-secret"}

EVAL = """
from agent_health import test, expect

@test("echo agent", prompt="hello agent")
async def echo(agent):
    r = await agent.run()
    expect(r.output).to_match("echoed|json answer|env")

@test("second", prompt="second prompt")
async def second(agent):
    await agent.run()
"""


def test_no_secret_in_results_recordings_or_logs(tmp_path, server, monkeypatch, caplog):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    script = str(Path(__file__).with_name("agent_script.py"))
    cfg = define_config(
        root=str(tmp_path),
        agents=[
            {
                "key": "rest",
                "connector": "http",
                "settings": {
                    "endpoint": server.url + "/echo?key=${S_QUERY_KEY}",
                    "auth": {"type": "bearer", "token": {"env": "S_TOKEN"}},
                    "headers": {"x-api-key": "${S_TOKEN}"},
                },
                "versions": {"ok": {}, "denied": {"endpoint": server.url + "/deny?key=${S_QUERY_KEY}"}},
            },
            {
                "key": "sub",
                "connector": "subprocess",
                "settings": {"command": [sys.executable, script, "env"], "env": {"AGENT_MODE": {"env": "S_SUB"}}},
                "versions": {"v1": {}},
            },
        ],
    )
    (tmp_path / "secrets.eval.py").write_text(textwrap.dedent(EVAL))
    loaded = load_tests([tmp_path / "secrets.eval.py"])
    assert not loaded.errors and len(loaded.tests) == 2
    caplog.set_level(logging.DEBUG)
    opts = RunSettings(concurrency=2, timeout_s=30, judge={"skip": True})
    results = []
    for ref in ("rest@ok", "rest@denied", "sub@v1"):
        results += run_tests(loaded.tests, cfg, ref, opts, replay="record")
    by_agent = {(r.agent, r.name): r for r in results}
    assert by_agent[("rest@ok", "echo agent")].status == "passed"
    assert by_agent[("sub@v1", "echo agent")].status == "passed"
    denied = by_agent[("rest@denied", "echo agent")]
    assert denied.status == "errored" and "agent rest@denied" in denied.error and "HTTP 401" in denied.error
    # The agent really received the credentials...
    sent = [r for r in server.requests if r["path"] == "/echo"][-1]
    assert {k.lower(): v for k, v in sent["headers"].items()}["authorization"] == "Bearer " + SECRETS["S_TOKEN"]
    # ...and none of them is in anything stored or logged.
    artifacts = [json.dumps([r.model_dump(mode="json") for r in results])]
    recs = sorted((tmp_path / ".agent_health" / "recordings").rglob("*.json"))
    assert len(recs) == 4  # 2 tests x (rest@ok, sub@v1); errored runs are not recorded
    artifacts += [p.read_text() for p in recs]
    artifacts.append(caplog.text)
    blob = "\n".join(artifacts)
    for name, value in SECRETS.items():
        assert value not in blob, f"secret ${name} leaked into a stored artifact"
    assert "[REDACTED]" in blob


DATA = """
tests:
  - name: first
    prompt: first question
  - name: failing
    prompt: please fail
  - name: third
    prompt: third question
"""


def test_one_failing_run_errors_one_test_and_the_others_go_on(tmp_path, server):
    cfg = define_config(
        root=str(tmp_path),
        agents=[
            {
                "key": "rest",
                "connector": "http",
                "settings": {"endpoint": server.url + "/chat", "retry": {"max_retries": 1, "backoff_s": 0.01}},
                "versions": {"v1": {}},
            }
        ],
    )
    (tmp_path / "cases.yaml").write_text(DATA)
    loaded = load_tests([tmp_path / "cases.yaml"])
    results = {
        r.name: r
        for r in run_tests(loaded.tests, cfg, "rest@v1", RunSettings(concurrency=3, timeout_s=30, judge={"skip": True}))
    }
    assert results["failing"].status == "errored"
    assert results["failing"].error == (
        f'agent rest@v1 ({server.url}/chat): HTTP 500: {{"error": "internal"}} (gave up after 2 attempts)'
    )
    assert results["first"].status == results["third"].status == "passed"
    assert results["first"].run.output == "answer to: first question"
