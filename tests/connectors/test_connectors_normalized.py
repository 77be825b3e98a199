"""The normalized run every connector gives: the user prompt as first event, roles on every step,
and artifacts from the per-run artifacts folder."""

from __future__ import annotations

import base64
import json
import sys

from tests.connectors.servers import invoke, invoke_error, runtime

WRITES_ARTIFACTS = """
import os, pathlib, sys
folder = pathlib.Path(os.environ["AGENT_HEALTH_ARTIFACTS_DIR"])
(folder / "out").mkdir()
(folder / "out" / "summary.json").write_text('{"ok": true}')
(folder / "big.bin").write_bytes(bytes(2048))
print("wrote " + sys.stdin.read())
"""


def test_the_demo_agent_opens_with_the_prompt_and_names_roles():
    r = invoke(runtime("demo", key="demo", version="v2"), "Diagnose why the payment service is failing.")
    first = r.trajectory[0]
    assert (first.kind, first.role, first.content) == (
        "message",
        "user",
        "Diagnose why the payment service is failing.",
    )
    assert r.messages("user") == [first]
    assert {s.role for s in r.agent_steps if s.kind == "tool_result"} == {"tool"}
    assert {s.role for s in r.agent_steps if s.kind != "tool_result"} == {"assistant"}
    assert r.agent_steps == r.trajectory[1:] and r.tool_calls()  # the demo agent calls tools


def test_files_in_the_artifacts_folder_become_artifacts_with_copies_up_to_the_cap():
    r = invoke(
        runtime("subprocess", command=[sys.executable, "-c", WRITES_ARTIFACTS], max_artifact_bytes=1024), "report"
    )
    assert r.output == "wrote report"
    big, summary = r.artifacts
    assert (summary.name, summary.media_type, summary.size) == ("out/summary.json", "application/json", 12)
    assert (summary.content, summary.encoding) == ('{"ok": true}', "utf-8") and len(summary.sha256 or "") == 64
    # above max_artifact_bytes: described (size, hash), not copied
    assert (big.name, big.size, big.content, big.encoding) == ("big.bin", 2048, None, None) and big.sha256


def test_a_rest_agent_lists_its_artifacts_by_copy_or_reference(server):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()

    @server.route("/with-artifacts")
    def with_artifacts(h, body):
        h.send_json(
            {
                "response": "report attached",
                "artifacts": [
                    {"name": "rca.md", "content": "# RCA\n"},
                    {"name": "chart.png", "media_type": "image/png", "data": png},
                    {"name": "trace.zip", "size": 9_000_000, "url": "https://files.example.com/trace.zip"},
                ],
            }
        )

    @server.route("/bad-artifacts")
    def bad_artifacts(h, body):
        h.send_json({"response": "x", "artifacts": [{"name": "a.txt", "content": "ok"}, {"size": 3}]})

    r = invoke(runtime("http", endpoint=server.url + "/with-artifacts"))
    md, chart, trace = r.artifacts
    assert (md.name, md.media_type, md.size, md.content, md.encoding) == (
        "rca.md",
        "text/markdown",
        6,
        "# RCA\n",
        "utf-8",
    )
    assert (chart.media_type, chart.size, chart.encoding, base64.b64decode(chart.content or "")) == (
        "image/png",
        8,
        "base64",
        b"\x89PNG\r\n\x1a\n",
    )
    assert (trace.size, trace.content, trace.uri) == (9_000_000, None, "https://files.example.com/trace.zip")
    msg = invoke_error(runtime("http", endpoint=server.url + "/bad-artifacts"))
    assert "agent@v1" in msg and "artifacts[1]: expected an object with a name" in msg


def test_a_python_agent_returns_artifacts_in_its_dict():
    def agent(prompt):
        return {"output": "done", "artifacts": [{"name": "notes.txt", "content": prompt}]}

    (notes,) = invoke(runtime("python", function=agent), "remember this").artifacts
    assert (notes.name, notes.media_type, notes.content, notes.size) == ("notes.txt", "text/plain", "remember this", 13)


def test_agui_message_roles_are_kept(server):
    """An AG-UI agent's messages say who speaks; developer counts as system."""

    @server.route("/agui-roles")
    def roles(h, body):
        tid, rid = body["threadId"], body["runId"]
        events = [
            {"type": "RUN_STARTED", "threadId": tid, "runId": rid},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "s", "role": "developer", "delta": "be brief"},
            {"type": "TEXT_MESSAGE_END", "messageId": "s"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "role": "assistant", "delta": "brief answer"},
            {"type": "TEXT_MESSAGE_END", "messageId": "a"},
            {"type": "RUN_FINISHED", "threadId": tid, "runId": rid},
        ]
        h.start_chunked()
        for e in events:
            h.chunk(f"data: {json.dumps(e)}\n\n".encode())
        h.end_chunked()

    r = invoke(runtime("agui", endpoint=server.url + "/agui-roles"), "answer briefly")
    assert [(s.role, s.content) for s in r.trajectory] == [
        ("user", "answer briefly"),
        ("system", "be brief"),
        ("assistant", "brief answer"),
    ]
    assert r.output == "brief answer"


def test_steps_a_rest_agent_lists_keep_their_roles(server):
    @server.route("/steps-with-roles")
    def steps(h, body):
        h.send_json(
            {
                "output": "fixed",
                "trajectory": [
                    {"kind": "message", "role": "developer", "content": "you are an SRE"},
                    {"kind": "tool_call", "name": "restart", "args": {}, "id": "c1"},
                    {"kind": "tool_result", "name": "restart", "id": "c1", "content": "ok"},
                    {"kind": "message", "role": "mystery", "content": "fixed"},
                ],
            }
        )

    r = invoke(runtime("http", endpoint=server.url + "/steps-with-roles"), "fix it")
    assert [s.role for s in r.trajectory] == ["user", "system", "assistant", "tool", "assistant"]
