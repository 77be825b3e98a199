"""Agent configuration: versions select overrides, env references stay references, `agents` lists them."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from agent_health.cli.agents import agents
from agent_health.config import define_config, load_config
from agent_health.errors import ConfigError
from agent_health.session import build_runtime
from tests.connectors.servers import invoke

CONFIG = """
from agent_health import define_config

config = define_config(
    default_agent="rest@v2",
    agents=[{
        "key": "rest", "connector": "http", "description": "REST RCA agent",
        "settings": {"endpoint": "ENDPOINT/echo", "model": "small", "headers": {"x-team": "sre"},
                     "auth": {"type": "bearer", "token": {"env": "CFG_TOKEN"}}},
        "versions": {"v1": {}, "v2": {"model": "large", "headers": {"x-build": "2"}}},
    }],
)
"""


def write_config(tmp_path, server):
    path = tmp_path / "agent_health_config.py"
    path.write_text(CONFIG.replace("ENDPOINT", server.url))
    return path


def test_versions_really_run_different_builds(tmp_path, server, monkeypatch):
    monkeypatch.setenv("CFG_TOKEN", "cfg-token-abc123")
    cfg = load_config(write_config(tmp_path, server))
    before = len(server.requests)
    invoke(build_runtime(cfg, "rest@v1"))
    invoke(build_runtime(cfg, "rest@v2"))
    (h1, b1), (h2, b2) = [
        ({k.lower(): v for k, v in r["headers"].items()}, r["body"]) for r in server.requests[before : before + 2]
    ]
    assert (b1["model"], b2["model"]) == ("small", "large")
    assert h1["x-team"] == h2["x-team"] == "sre" and "x-build" not in h1 and h2["x-build"] == "2"
    # The resolved agent (what Dagster partitions and the UI see) keeps the reference, not the value.
    assert cfg.agent("rest@v2").settings["auth"]["token"] == {"env": "CFG_TOKEN"}


def test_agents_command_lists_versions_without_secrets(tmp_path, server, monkeypatch):
    monkeypatch.setenv("CFG_TOKEN", "cfg-token-abc123")
    cfg = load_config(write_config(tmp_path, server))
    out = CliRunner().invoke(agents, [], obj={"config": cfg})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert any(line.startswith("  rest@v1") and f"{server.url}/echo" in line for line in lines)
    assert any(line.startswith("* rest@v2") and '"model": "large"' in line for line in lines)
    assert any("demo@v1" in line for line in lines)
    rows = json.loads(CliRunner().invoke(agents, ["--json", "--check"], obj={"config": cfg}).output)
    assert {r["ref"]: r["status"] for r in rows}["rest@v2"] == "ok"
    assert "cfg-token-abc123" not in out.output


def test_agents_check_names_the_broken_setting(tmp_path, server, monkeypatch):
    monkeypatch.delenv("CFG_TOKEN", raising=False)
    cfg = load_config(write_config(tmp_path, server))
    out = CliRunner().invoke(agents, ["--check"], obj={"config": cfg})
    assert out.exit_code == 2  # a configuration error, as `run` exits on it
    assert "error: setting agents.rest.settings.auth.token: environment variable CFG_TOKEN is not set" in out.output


def test_agents_command_falls_back_to_load_config(tmp_path, server, monkeypatch):
    write_config(tmp_path, server)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENT_HEALTH_CONFIG", raising=False)
    out = CliRunner().invoke(agents, [])
    assert out.exit_code == 0 and "rest@v2" in out.output and "agent_health_config.py" in out.output


def test_config_errors_name_the_setting():
    with pytest.raises(ConfigError, match=r"agents\.x\.connector"):
        define_config(agents=[{"key": "x", "connector": "grpc"}])
    with pytest.raises(ConfigError, match="version name 'a@b'"):
        define_config(agents=[{"key": "x", "connector": "http", "versions": {"a@b": {}}}])
    with pytest.raises(ConfigError, match=r"unknown version 'v9' of agent 'demo'"):
        define_config().agent("demo@v9")
    assert isinstance(agents, click.Command)


def test_secret_helpers():
    import email.utils
    import time

    from agent_health.config.secrets import SecretSet, display_value, resolve_env_refs
    from agent_health.connectors.retry import RetryPolicy, parse_retry_after

    secrets = SecretSet()
    value = resolve_env_refs(
        {"a": {"env": "H_X"}, "b": ["Bearer ${H_X}", 3]}, "agents.k.settings", secrets, environ={"H_X": "abcd1234"}
    )
    assert value == {"a": "abcd1234", "b": ["Bearer abcd1234", 3]}
    plain = resolve_env_refs({"model": {"env": "H_M", "secret": False}}, "s", secrets, environ={"H_M": "gpt-big"})
    assert plain == {"model": "gpt-big"} and secrets.scrub("gpt-big") == "gpt-big"
    assert secrets.scrub({"k": ("x abcd1234 y",)}) == {"k": ("x [REDACTED] y",)}
    assert display_value({"token": {"env": "H_X"}, "password": "literal", "url": "${U}"}) == {
        "token": "${H_X}",
        "password": "[REDACTED]",
        "url": "${U}",
    }
    assert parse_retry_after("2") == 2.0 and parse_retry_after("soon") is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < parse_retry_after(future) <= 30
    policy = RetryPolicy(backoff_s=1, max_backoff_s=4)
    assert policy.delay(0, "100") == 4  # Retry-After is honoured but capped
    assert all(0 <= policy.delay(5) <= 4 for _ in range(20))
