"""The subprocess connector with a small agent script: formats, prompt passing, env, faults."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tests.connectors.servers import invoke, invoke_error, runtime

SCRIPT = str(Path(__file__).with_name("agent_script.py"))


def agent(mode: str, **settings):
    return runtime("subprocess", command=[sys.executable, SCRIPT, mode], **settings)


def test_json_output_via_stdin():
    r = invoke(agent("json"), "disk full?")
    assert r.output == "json answer to disk full?"
    assert r.first_tool_call("search_logs").args == {"q": "disk full?"}
    assert r.steps_of_type("tool_result")[0].content == "3 errors"
    assert (r.usage.input_tokens, r.usage.output_tokens) == (5, 3)


def test_text_output_prompt_as_argument():
    r = invoke(
        runtime("subprocess", command=f"{sys.executable} {SCRIPT}", args=["text", "{prompt}"], prompt_via="arg"),
        "hi there",
    )
    assert r.output == "text answer to hi there"


def test_jsonl_event_stream():
    r = invoke(agent("jsonl"), "cpu?")
    assert [(s.kind, s.role) for s in r.trajectory] == [
        ("message", "user"),
        ("thinking", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("message", "assistant"),
    ]
    assert r.trajectory[0].content == "cpu?"
    assert r.output == "jsonl answer to cpu?" and r.first_tool_call("query_metrics").args == {"m": "cpu"}
    assert (r.usage.input_tokens, r.usage.output_tokens) == (40, 10) and len(r.raw_events) == 5


def test_env_cwd_trace_context_and_json_stdin(tmp_path):
    r = invoke(
        agent("env", cwd=str(tmp_path), env={"AGENT_MODE": "fast"}, stdin_format="json", model="m1"),
        "p",
        env={"EXTRA": "from-test"},
        provisioned={"k": 1},
    )
    doc = r.raw_events[0]
    assert doc["env"] == {
        "TRACEPARENT": f"00-{r.trace_id}-" + doc["env"]["TRACEPARENT"].split("-")[2] + "-01",
        "AGENT_HEALTH_RUN_ID": r.run_id,
        "AGENT_MODE": "fast",
        "EXTRA": "from-test",
    }
    assert Path(doc["cwd"]) == tmp_path
    assert doc["request"] == {"prompt": "p", "context": [], "run_id": r.run_id, "provisioned": {"k": 1}, "model": "m1"}


def test_non_zero_exit():
    msg = invoke_error(agent("fail"))
    assert f"agent agent@v1 ({sys.executable} {SCRIPT} fail): exited with status 3" in msg
    assert "model backend unreachable" in msg


def test_hang_kills_whole_process_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    t0 = time.perf_counter()
    msg = invoke_error(agent("hang", timeout_s=1.0, env={"CHILD_PID_FILE": str(pid_file)}))
    assert time.perf_counter() - t0 < 5
    assert "timed out after 1s; killed its process group" in msg and "hang" in msg
    child = int(pid_file.read_text())
    for _ in range(50):  # the child was SIGKILLed with the group; wait for init to reap it
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as fh:
            if fh.read().split()[2] == "Z":
                break
        time.sleep(0.05)
    else:
        raise AssertionError(f"child process {child} survived the timeout")


def test_non_utf8_output():
    msg = invoke_error(agent("latin1"))
    assert "output is not valid UTF-8: byte 0xe9 at offset 3" in msg


def test_error_event_and_missing_command():
    assert "agent reported an error: tool backend down" in invoke_error(agent("error-event"))
    msg = invoke_error(runtime("subprocess", command="/nonexistent/agent-binary"))
    assert msg.startswith("agent agent@v1 (/nonexistent/agent-binary): cannot start") and "No such file" in msg


def test_malformed_json_output():
    msg = invoke_error(runtime("subprocess", command=[sys.executable, "-c", "print('{\"a\": ')"]))
    assert "malformed JSON output" in msg


def test_secret_env_values_scrubbed(monkeypatch):
    monkeypatch.setenv("SUB_TOKEN", "sub-secret-token-77")
    r = invoke(agent("env", env={"AGENT_MODE": "${SUB_TOKEN}", "EXTRA": "x"}))
    assert "sub-secret-token-77" not in json.dumps(r.model_dump())
    assert r.raw_events[0]["env"]["AGENT_MODE"] == "[REDACTED]"


def test_provisioned_files_in_a_fresh_folder():
    r = invoke(agent("files"), files={"runbook.md": "# restart", "data/config.json": {"replicas": 3}})
    assert r.raw_events[0]["files"] == {"runbook.md": "# restart", "data/config.json": '{"replicas": 3}'}
    msg = invoke_error(agent("files"), files={"../escape.txt": "x"})
    assert "provisioned file name '../escape.txt' points outside the files folder" in msg
