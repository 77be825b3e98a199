"""Secrets: every credential the project resolves (agent auth, the judge's API key, the trace
source's password) is scrubbed everywhere, in its common encodings, even when an AG-UI agent
streams it split across two deltas. Real local servers and real processes; afterwards every
artifact (results, reports, judge cache, recordings, Dagster storage, stdout/stderr) is searched
byte for byte for every form of every secret."""

from __future__ import annotations

import base64
import json
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from agent_health.config.secrets import REDACTED, SecretSet, encoded_forms
from agent_health.model import RunReport
from tests.faults.conftest import cli, python

JUDGE_KEY = "sk-faults-JudgeKey/0123+abcdEFGH"
AGENT_TOKEN = "agui-Token/4567+ijklMNOP"
OS_PASSWORD = "os-Pass/89ab+qrstUVWX"


def forms(secret: str, user: str = "reader") -> dict[str, str]:
    """The forms a secret is commonly stored in; each must be caught."""
    raw = secret.encode()
    return {
        "plain": secret,
        "upper": secret.upper(),
        "lower": secret.lower(),
        "swapped": secret.swapcase(),
        "percent": quote(secret, safe=""),
        "percent-lower": quote(secret, safe="").lower(),
        "plus": quote_plus(secret),
        "base64": base64.b64encode(raw).decode(),
        "base64-unpadded": base64.b64encode(raw).decode().rstrip("="),
        "base64url": base64.urlsafe_b64encode(raw).decode(),
        "basic-auth": base64.b64encode(f"{user}:{secret}".encode()).decode(),
        "basic-auth-2": base64.b64encode(f"{user}x:{secret}".encode()).decode(),
        "basic-auth-3": base64.b64encode(f"{user}xy:{secret}".encode()).decode(),
        "basic-auth-url": base64.urlsafe_b64encode(f"{user}:{secret}".encode()).decode(),
        "bearer-in-json-base64": base64.b64encode(json.dumps({"h": f"Bearer {secret}"}).encode()).decode(),
        "json-escaped": json.dumps(secret)[1:-1],
    }


def leaks(blob: bytes, secret: str) -> list[str]:
    """Names of the forms of `secret` found in `blob` (the exact forms, and the case-folded ones)."""
    low = blob.lower()
    found = []
    for name, form in forms(secret).items():
        needle = form.encode()
        folded = name in ("plain", "upper", "lower", "swapped", "percent", "percent-lower", "plus", "json-escaped")
        if (needle.lower() in low) if folded else (needle in blob):
            found.append(name)
    # the base64 runs only the secret's own bytes determine, at each alignment (user:secret of any length)
    _, exact = encoded_forms(secret)
    found += [f"base64-run:{e}" for e in exact if e.encode() in blob]
    return found


@pytest.mark.parametrize("form", list(forms(JUDGE_KEY)))
def test_each_form_is_scrubbed_inside_any_text(form):
    secrets = SecretSet([JUDGE_KEY])
    text = f"prefix {forms(JUDGE_KEY)[form]} suffix"
    out = secrets.scrub_text(text)
    assert REDACTED in out and out.startswith("prefix ") and out.endswith(" suffix")
    assert leaks(out.encode(), JUDGE_KEY) == []


def test_ordinary_text_is_left_alone():
    secrets = SecretSet([JUDGE_KEY, AGENT_TOKEN])
    text = "The payment service cannot reach db-primary:5432; base64 of nothing: c2stZmF1bHRz"
    assert secrets.scrub_text(text) == text


@pytest.mark.parametrize(
    "pieces",
    [
        ["before sk-faults-Judge", "Key/0123+abcdEFGH after"],
        ["sk-", "faults-", "JudgeKey/", "0123+abcd", "EFGH"],
        ["a", "sk-faults-JudgeKey/0123+abcdEFGH", "b"],
        ["SK-FAULTS-JUDGE", "KEY/0123+ABCDEFGH"],
    ],
)
def test_a_secret_split_across_pieces_is_scrubbed(pieces):
    out = SecretSet([JUDGE_KEY]).scrub_pieces(pieces)
    assert len(out) == len(pieces) and REDACTED in "".join(out)
    assert leaks("".join(out).encode(), JUDGE_KEY) == []
    assert all(leaks(p.encode(), JUDGE_KEY) == [] for p in out)


# -- end to end ------------------------------------------------------------------------------


def echo_everything(secret: str) -> str:
    return " | ".join(f"{name}={form}" for name, form in forms(secret).items())


@pytest.fixture
def judge_server():
    from tests.judges.helpers import ScriptedServer, chat, verdict_json

    server = ScriptedServer()

    def reply(request: Any) -> tuple[int, dict[str, str], Any]:
        prompt = json.dumps(request.json)
        if "unauthorized outcome" in prompt:  # a provider whose 401 body echoes the key it got
            return 401, {}, {"error": {"message": f"Incorrect API key provided: {echo_everything(JUDGE_KEY)}"}}
        return chat(verdict_json(True, 0.9, f"I was called with {echo_everything(JUDGE_KEY)}"))

    server.default = reply
    yield server
    server.close()


CONFIG = """
from agent_health import define_config

config = define_config(
    judge={{
        "provider": "openai",
        "model": "judge-model",
        "settings": {{"base_url": "{url}/v1", "api_key_env": "FAULTS_JUDGE_KEY"}},
        "backoff_s": 0.01,
        "max_retries": 0,
    }},
)
"""

JUDGED = """
tests:
  - name: echoed verdict
    prompt: Diagnose why the payment service is failing.
    expected_outcomes: identifies that the payment service cannot reach its database
  - name: rejected key
    prompt: checkout is slow, p99 latency above 4 seconds
    expected_outcomes: unauthorized outcome
"""


def every_artifact(root: Path, *streams: str) -> bytes:
    files = [p for p in root.rglob("*") if p.is_file() and p.suffix != ".py"]
    return b"\n".join([p.read_bytes() for p in files] + [s.encode("utf-8", "backslashreplace") for s in streams])


def test_judge_key_echoed_by_the_provider_is_stored_nowhere(tmp_path, evals, judge_server):
    evals("judged.yaml", JUDGED)
    (tmp_path / "agent_health_config.py").write_text(textwrap.dedent(CONFIG.format(url=judge_server.url)))
    env = {"FAULTS_JUDGE_KEY": JUDGE_KEY}
    proc = cli(
        "run", "evals", "-v", "--reporter", "json=out/report.json", "--reporter", "junit=out/junit.xml",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the rejected key errors one test
    dagster_env = {**env, "AGENT_HEALTH_CONFIG": str(tmp_path / "agent_health_config.py")}
    headless = python(
        "import sys; from agent_health_dagster.headless import main; sys.exit(main(['--agents', 'demo@v2']))",
        cwd=tmp_path,
        env={**dagster_env, "DAGSTER_HOME": str(tmp_path / "home")},
        timeout=300,
    )
    # exit 1, as the CLI's: the rejected key errors one test, past the errored-share check
    assert headless.returncode == 1, headless.stdout[-2000:] + headless.stderr[-3000:]
    assert "FAILED errored_share_threshold" in headless.stdout

    # the provider really got the key, and really echoed it back
    assert {r.headers.get("authorization") for r in judge_server.posts()} == {f"Bearer {JUDGE_KEY}"}
    report = RunReport.model_validate_json((tmp_path / "out" / "report.json").read_text())
    results = {r.name: r for r in report.results}
    judged = [s for s in results["echoed verdict"].signals if s.kind == "judge"]
    assert judged and REDACTED in (judged[0].reasoning or "")
    assert results["rejected key"].status == "errored" and "401" in results["rejected key"].error
    assert REDACTED in results["rejected key"].error
    # ...and no form of it is anywhere: reports, results, judge cache, Dagster storage, output
    assert (tmp_path / ".agent_health" / "judge_cache.sqlite").exists()
    assert list((tmp_path / ".agent_health" / "results").rglob("*.json"))
    blob = every_artifact(tmp_path, proc.stdout, proc.stderr, headless.stdout, headless.stderr)
    assert leaks(blob, JUDGE_KEY) == []


def agui_route(server: Any) -> None:
    """An AG-UI agent that streams its own bearer token back: split across two text deltas and
    two tool-call argument deltas, and encoded in tool results, reasoning, state and custom events."""
    from ag_ui.core import (
        CustomEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageEndEvent,
        ReasoningMessageStartEvent,
        RunFinishedEvent,
        RunStartedEvent,
        StateSnapshotEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
    )
    from ag_ui.encoder import EventEncoder

    enc = EventEncoder()

    @server.route("/leaky")
    def leaky(h: Any, body: Any) -> None:
        token = h.headers["authorization"].split(" ", 1)[1]
        half = len(token) // 2
        f = forms(token, user="agent")
        events = [
            RunStartedEvent(thread_id=body["threadId"], run_id=body["runId"]),
            ReasoningMessageStartEvent(message_id="r1", role="reasoning"),
            ReasoningMessageContentEvent(message_id="r1", delta=f"my token upper-cased is {f['upper']}"),
            ReasoningMessageEndEvent(message_id="r1"),
            ToolCallStartEvent(tool_call_id="tc1", tool_call_name="search_logs"),
            ToolCallArgsEvent(tool_call_id="tc1", delta='{"service": "payment", "key": "' + token[:half]),
            ToolCallArgsEvent(tool_call_id="tc1", delta=token[half:] + '"}'),
            ToolCallEndEvent(tool_call_id="tc1"),
            ToolCallResultEvent(message_id="m_tr", tool_call_id="tc1", content=f"auth {f['basic-auth']} ok"),
            StateSnapshotEvent(snapshot={"cookie": f["percent"], "b64": f["base64url"]}),
            CustomEvent(name="debug", value={"token": f["lower"], "plus": f["plus"]}),
            TextMessageStartEvent(message_id="m1", role="assistant"),
            TextMessageContentEvent(message_id="m1", delta="The payment service cannot reach its database; token "),
            TextMessageContentEvent(message_id="m1", delta=token[:half]),
            TextMessageContentEvent(message_id="m1", delta=token[half:] + " end."),
            TextMessageEndEvent(message_id="m1"),
            RunFinishedEvent(thread_id=body["threadId"], run_id=body["runId"]),
        ]
        h.start_chunked()
        for ev in events:
            h.chunk(enc.encode(ev).encode())
        h.end_chunked()


AGUI_CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{{
        "key": "leaky",
        "connector": "agui",
        "settings": {{
            "endpoint": "{url}/leaky",
            "auth": {{"type": "bearer", "token": {{"env": "FAULTS_AGUI_TOKEN"}}}},
        }},
        "versions": {{"v1": {{}}}},
    }}],
    default_agent="leaky@v1",
)
"""

AGUI_EVAL = """
from agent_health import test, expect


@test("streams its token", prompt="Diagnose why the payment service is failing.")
async def streams(agent):
    result = await agent.run()
    expect(result.output).to_contain("cannot reach its database")
    expect(result).to_have_called_tool("search_logs", args={"service": "payment"})
"""


def test_agui_secret_split_across_deltas_and_encoded_is_stored_nowhere(tmp_path, evals):
    from tests.connectors.servers import AgentServer

    server = AgentServer()
    agui_route(server)
    with server:
        evals("leaky.eval.py", AGUI_EVAL)
        (tmp_path / "agent_health_config.py").write_text(textwrap.dedent(AGUI_CONFIG.format(url=server.url)))
        proc = cli(
            "run", "evals", "-v", "--no-judge", "--replay", "record", "--reporter", "json=out/report.json",
            "--reporter", "junit=out/junit.xml", cwd=tmp_path, env={"FAULTS_AGUI_TOKEN": AGENT_TOKEN},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert server.requests[-1]["headers"]["authorization"] == f"Bearer {AGENT_TOKEN}"
    report = RunReport.model_validate_json((tmp_path / "out" / "report.json").read_text())
    [result] = report.results
    deltas = [
        e["delta"] for e in result.run.raw_events if isinstance(e, dict) and e.get("type") == "TEXT_MESSAGE_CONTENT"
    ]
    assert deltas[1] == REDACTED and deltas[2] == " end."  # the first half shows REDACTED, the rest is gone
    assert list((tmp_path / ".agent_health" / "recordings").rglob("*.json"))
    assert leaks(every_artifact(tmp_path, proc.stdout, proc.stderr), AGENT_TOKEN) == []


TRACED_CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{{
        "key": "talker",
        "connector": "python",
        "settings": {{"function": "talker:run"}},
        "versions": {{"v1": {{}}}},
        "traces": True,
    }}],
    default_agent="talker@v1",
    traces={{
        "source": "opensearch",
        "settings": {{
            "url": "{url}",
            "index": "faults-no-spans-*",
            "auth": {{"type": "basic", "username": "reader", "password_env": "FAULTS_OS_PASSWORD"}},
        }},
        "wait_s": 0,
    }},
)
"""

TALKER = """
import base64
import os


def run(prompt):
    password = os.environ["FAULTS_OS_PASSWORD"]  # an agent that happens to know the trace store's password
    basic = base64.b64encode(f"reader:{password}".encode()).decode()
    return f"the cluster password is {password}, Authorization: Basic {basic}"
"""


def test_trace_source_password_is_scrubbed(tmp_path, evals, opensearch_url):
    evals("talk.yaml", "tests:\n  - name: talk\n    prompt: what is the password?\n")
    (tmp_path / "talker.py").write_text(textwrap.dedent(TALKER))
    (tmp_path / "agent_health_config.py").write_text(textwrap.dedent(TRACED_CONFIG.format(url=opensearch_url)))
    proc = cli(
        "run", "evals", "-v", "--no-judge", "--reporter", "json=out/report.json",
        cwd=tmp_path, env={"FAULTS_OS_PASSWORD": OS_PASSWORD},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [result] = RunReport.model_validate_json((tmp_path / "out" / "report.json").read_text()).results
    assert result.run.output.startswith(f"the cluster password is {REDACTED}, Authorization: Basic ")
    assert leaks(every_artifact(tmp_path, proc.stdout, proc.stderr), OS_PASSWORD) == []
