"""The claude connector through `agent-health run`, against a scripted `claude` executable that
prints a recorded stream-json transcript (tests/connectors/claude_transcript.jsonl): trajectory,
roles, tool calls, usage, reported cost, artifacts, and the faults that make a test errored."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from agent_health import RunReport, RunSettings, define_config, load_tests, run_tests
from tests.conftest import ROOT, run_cli

BIN = Path(__file__).with_name("claude_bin")
DOC = ROOT / "docs" / "connectors.md"

EVAL = """
from agent_health import test, expect

@test("claude finds the database", prompt="Why is the payment service failing?")
async def rca(agent):
    r = await agent.run()
    expect(r).to_have_called_tool("Bash")
"""


def doc_config() -> str:
    """The config example of docs/connectors.md, as written."""
    return re.search(r"```python\n(# agent_health_config.py: Claude Code.*?)```", DOC.read_text(), re.S).group(1)


def run_claude(tmp_path: Path, config: str, *args: str):
    (tmp_path / "agent_health_config.py").write_text(config)
    (tmp_path / "evals").mkdir(exist_ok=True)
    (tmp_path / "evals" / "claude.eval.py").write_text(EVAL)
    env = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    p = run_cli("run", "evals", "--reporter", "json=r.json", "--no-judge", *args, cwd=tmp_path, env=env)
    report = RunReport.model_validate_json((tmp_path / "r.json").read_text())
    return p, report.results[0]


def test_the_documented_config_runs_claude_and_reads_its_stream(tmp_path):
    p, result = run_claude(tmp_path, doc_config())
    assert p.returncode == 0, p.stdout + p.stderr
    assert result.status == "passed" and result.agent == "claude-rca@sonnet"
    run = result.run
    assert run.output.startswith("The payment service cannot reach its database")
    assert [(s.kind, s.role) for s in run.trajectory] == [
        ("message", "user"),
        ("message", "system"),
        ("thinking", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("message", "assistant"),
    ]
    assert run.trajectory[0].content == "Why is the payment service failing?"
    assert (
        "claude-sonnet-4-5-20250929" in run.trajectory[1].content
        and "Bash, Read, Write, Grep" in run.trajectory[1].content
    )
    bash = run.first_tool_call("Bash")
    assert bash.args["command"] == "grep ERROR /var/log/payments.log | tail -3" and bash.call_id == "toolu_01Logs"
    results = run.steps_of_type("tool_result")
    assert results[0].tool == "Bash" and "connection refused" in results[0].content and not results[0].is_error
    assert results[1].tool == "Read" and results[1].content == "File does not exist." and results[1].is_error
    # one model call per assistant message; its usage (cache included) on its first step only
    assert (run.trajectory[2].input_tokens, run.trajectory[2].output_tokens) == (1512, 40)
    assert run.trajectory[3].input_tokens is None
    u = run.usage
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (31 + 1500 + 4800, 123, 6454)
    assert (u.model, u.llm_calls, u.cost_usd) == ("claude-sonnet-4-5", 4, 0.0213)
    assert result.cost_usd == 0.0213 and result.metrics["cost_usd"] == 0.0213  # the reported cost, not a guess
    # the file it wrote with its Write tool (in its cwd, the project root) is an artifact
    (art,) = run.artifacts
    assert (art.name, art.media_type, art.encoding) == ("rca.md", "text/markdown", "utf-8")
    assert art.content == (tmp_path / "rca.md").read_text() and art.size == len(art.content.encode())
    assert art.uri == (tmp_path / "rca.md").resolve().as_uri()
    assert run.raw_events[-1]["type"] == "result"


CONFIG = """
import sys
from agent_health import define_config

config = define_config(
    agents=[{{
        "key": "cc",
        "connector": "claude",
        "settings": {{
            "command": [sys.executable, {script!r}], "env": {{"FAKE_CLAUDE_MODE": {mode!r}}}, "timeout_s": 2,
        }},
        "versions": {{"v1": {{}}}},
    }}],
    default_agent="cc@v1",
)
"""


def config(mode: str) -> str:
    return CONFIG.format(script=str(BIN / "claude"), mode=mode)


def test_files_in_the_artifacts_folder_are_stored_with_the_result(tmp_path):
    p, result = run_claude(tmp_path, config("artifact"), "--reporter", "html=report.html")
    assert p.returncode == 0, p.stdout + p.stderr
    by_name = {a.name: a for a in result.run.artifacts}
    png = by_name["chart.png"]
    assert (png.media_type, png.encoding, png.size) == ("image/png", "base64", 8 + 256)
    assert by_name["rca.md"].content.startswith("# RCA")
    html = (tmp_path / "report.html").read_text()
    assert "chart.png" in html and "image/png" in html and "rca.md" in html


def test_a_non_zero_exit_is_errored_with_the_result_events_message(tmp_path):
    p, result = run_claude(tmp_path, config("exit"))
    assert p.returncode == 1 and result.status == "errored"
    assert "agent cc@v1" in result.error and "exited with status 1" in result.error
    assert "authentication failed" in result.error
    assert "error_during_execution after 1 turn(s): API Error: 401 invalid x-api-key" in result.error


def test_a_malformed_line_is_errored_naming_the_line(tmp_path):
    p, result = run_claude(tmp_path, config("malformed"))
    assert p.returncode == 1 and result.status == "errored" and "malformed stream-json on output line 4" in result.error


def test_a_stream_without_a_result_event_is_errored(tmp_path):
    p, result = run_claude(tmp_path, config("no-result"))
    assert p.returncode == 1 and result.status == "errored"
    assert "stream ended without a result event (9 event(s) read)" in result.error


def test_the_fixture_is_claude_codes_stream_json_shape():
    """The recorded transcript keeps the documented event shapes the connector reads."""
    events = [
        json.loads(line) for line in (Path(__file__).with_name("claude_transcript.jsonl")).read_text().splitlines()
    ]
    assert events[0]["type"] == "system" and events[-1]["type"] == "result"
    assert {"total_cost_usd", "usage", "num_turns", "is_error", "subtype", "result"} <= events[-1].keys()


def test_a_session_that_never_ends_is_killed_at_timeout_s(tmp_path):
    p, result = run_claude(tmp_path, config("hang"))
    assert p.returncode == 1 and result.status == "errored"
    assert "timed out after 2s; killed its process group" in result.error


def test_an_error_result_is_errored_even_with_exit_status_0(tmp_path):
    p, result = run_claude(tmp_path, config("max-turns"))
    assert p.returncode == 1 and result.status == "errored"
    assert "Claude Code reported an error: error_max_turns after 4 turn(s)" in result.error


def test_a_conversation_resumes_claude_codes_session(tmp_path):
    """Each turn after the first runs `claude -p --resume <session id>` with the session id the
    turn before reported, and the turn's message on stdin."""
    log = tmp_path / "calls.jsonl"
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "chat.eval.py").write_text(
        "from agent_health import test\n\n"
        '@test("follow-up", prompt="Why is the payment service failing?")\n'
        "async def follow_up(agent):\n"
        '    await agent.run(turns=["And how do we fix it?"])\n'
    )
    settings = {"command": [sys.executable, str(BIN / "claude")], "env": {"FAKE_CLAUDE_LOG": str(log)}}
    config = define_config(
        root=str(tmp_path), agents=[{"key": "cc", "connector": "claude", "settings": settings, "versions": {"v1": {}}}]
    )
    (result,) = run_tests(load_tests([tmp_path / "evals"]).tests, config, "cc@v1", settings=RunSettings(store=None))
    assert result.status == "passed", result.error
    first, second = (json.loads(line) for line in log.read_text().splitlines())
    assert "--resume" not in first["args"] and first["prompt"] == "Why is the payment service failing?"
    assert second["args"][4:6] == ["--resume", "5f1c2e9a-7d7b-4a51-9a0e-0c6f3f1b2d11"]
    assert second["prompt"] == "And how do we fix it?"
    assert [t.user for t in result.run.turns] == [first["prompt"], second["prompt"]]
