"""The normalized run every connector gives: the user prompt as first event, roles on every step,
and artifacts from the per-run artifacts folder."""

from __future__ import annotations

import sys

from tests.connectors.servers import invoke, runtime

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
