"""Record/replay in all four modes, through session.build_runtime (the path every transport uses)."""

from __future__ import annotations

import json

import pytest

from agent_health.config import define_config
from agent_health.errors import AgentError, ConfigError
from agent_health.session import build_runtime, replay_mode
from tests.connectors.servers import invoke


def project(tmp_path, server, **kw):
    return define_config(
        root=str(tmp_path),
        agents=[
            {
                "key": "rest",
                "connector": "http",
                "settings": {"endpoint": server.url + "/count"},
                "versions": {"v1": {}, "v2": {"body": {"variant": 2}}},
            }
        ],
        **kw,
    )


def recordings(tmp_path):
    return sorted((tmp_path / ".agent_health" / "recordings").rglob("*.json"))


def calls(server, prompt):
    return server.counts["count:" + prompt]


def test_off_never_records(tmp_path, server):
    cfg = project(tmp_path, server)
    a = invoke(build_runtime(cfg, "rest@v1", replay="off"), "off-prompt")
    b = invoke(build_runtime(cfg, "rest@v1", replay="off"), "off-prompt")
    assert calls(server, "off-prompt") == 2 and not a.replayed and not b.replayed
    assert recordings(tmp_path) == []


def test_record_always_runs_and_overwrites(tmp_path, server):
    cfg = project(tmp_path, server)
    invoke(build_runtime(cfg, "rest@v1", replay="record"), "rec-prompt")
    r = invoke(build_runtime(cfg, "rest@v1", replay="record"), "rec-prompt")
    assert calls(server, "rec-prompt") == 2 and not r.replayed
    [path] = recordings(tmp_path)
    assert path.parent.name == "v1" and path.parent.parent.name == "rest"
    doc = json.loads(path.read_text())
    assert doc["agent"] == "rest@v1" and doc["result"]["output"] == "call 2 for rec-prompt"


def test_auto_records_then_replays(tmp_path, server):
    cfg = project(tmp_path, server)
    first = invoke(
        build_runtime(cfg, "rest@v1", replay="auto"), "auto-prompt", context=({"description": "d", "value": "v"},)
    )
    second = invoke(
        build_runtime(cfg, "rest@v1", replay="auto"), "auto-prompt", context=({"description": "d", "value": "v"},)
    )
    assert calls(server, "auto-prompt") == 1
    assert not first.replayed and second.replayed
    assert second.output == first.output and second.trajectory == first.trajectory
    assert second.run_id == first.run_id  # traces of the recorded run stay reachable
    # Another context, provisioned value or version is another recording.
    invoke(build_runtime(cfg, "rest@v1", replay="auto"), "auto-prompt")
    invoke(build_runtime(cfg, "rest@v1", replay="auto"), "auto-prompt", provisioned={"seed": 1})
    invoke(build_runtime(cfg, "rest@v2", replay="auto"), "auto-prompt", context=({"description": "d", "value": "v"},))
    assert calls(server, "auto-prompt") == 4 and len(recordings(tmp_path)) == 4


def test_strict_replays_or_fails(tmp_path, server):
    cfg = project(tmp_path, server)
    with pytest.raises(
        AgentError,
        match=r"agent rest@v1 \(.*/count\): no recording for this prompt and context "
        r"\(replay mode strict",
    ):
        invoke(build_runtime(cfg, "rest@v1", replay="strict"), "strict-prompt")
    assert calls(server, "strict-prompt") == 0
    invoke(build_runtime(cfg, "rest@v1", replay="record"), "strict-prompt")
    r = invoke(build_runtime(cfg, "rest@v1", replay="strict"), "strict-prompt")
    assert r.replayed and r.output == "call 1 for strict-prompt" and calls(server, "strict-prompt") == 1


def test_mode_precedence_flag_env_config(tmp_path, server, monkeypatch):
    cfg = project(tmp_path, server, replay="auto")
    monkeypatch.delenv("AGENT_HEALTH_REPLAY", raising=False)
    assert replay_mode(cfg) == "auto"
    monkeypatch.setenv("AGENT_HEALTH_REPLAY", "strict")
    assert replay_mode(cfg) == "strict" and replay_mode(cfg, "record") == "record"
    monkeypatch.setenv("AGENT_HEALTH_REPLAY", "sometimes")
    with pytest.raises(ConfigError, match=r"\$AGENT_HEALTH_REPLAY: unknown replay mode 'sometimes'"):
        replay_mode(cfg)
    with pytest.raises(ConfigError, match="replay: unknown replay mode 'bogus'"):
        project(tmp_path, server, replay="bogus")


def test_corrupt_recording_is_a_clear_error(tmp_path, server):
    cfg = project(tmp_path, server)
    invoke(build_runtime(cfg, "rest@v1", replay="record"), "corrupt-prompt")
    [path] = recordings(tmp_path)
    path.write_text("{not json")
    with pytest.raises(AgentError, match=rf"recording {path} is unreadable"):
        invoke(build_runtime(cfg, "rest@v1", replay="auto"), "corrupt-prompt")
