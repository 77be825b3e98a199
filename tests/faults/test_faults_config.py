"""Configuration typos are errors, never dropped silently: an unknown key in `define_config`, in an
agent, in the judge or trace settings, or in a store's settings; duplicate agent keys; an agent key
with an '@'; a judge model naming no provider. Each is exit 2 with one line that names the
configuration file and the key, and says what was probably meant. And `--agent KEY` (no version)
runs the agent's default version instead of crashing."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.support.cli import cli_in_process

PROMPT = "Diagnose why the payment service is failing."
CASES = f"tests:\n  - name: payment outage\n    prompt: {PROMPT}\n"


def project(tmp_path, evals, config_body: str | None) -> None:
    evals("smoke.yaml", CASES)
    if config_body is not None:
        (tmp_path / "agent_health_config.py").write_text(
            "from agent_health import define_config\n\nconfig = define_config(\n"
            + textwrap.indent(textwrap.dedent(config_body).strip(), "    ")
            + "\n)\n"
        )


@pytest.mark.parametrize(
    ("config_body", "expected"),
    [
        ("concurency=4,", ["unknown setting 'concurency'", "did you mean 'concurrency'?"]),
        ("timout_s=30,", ["unknown setting 'timout_s'", "did you mean 'timeout_s'?"]),
        (
            'agents=[{"key": "shop", "connector": "demo", "versions": {"v1": {}}, "timout_s": 3}],',
            ["agents.shop: unknown setting 'timout_s'", "go under 'settings'"],
        ),
        (
            'agents=[{"key": "shop", "conector": "demo", "versions": {"v1": {}}}],',
            ["agents.shop: unknown setting 'conector'", "did you mean 'connector'?"],
        ),
        (
            'agents=[{"key": "shop", "connector": "dmeo", "versions": {"v1": {}}}],',
            ["unknown connector 'dmeo'", "did you mean 'demo'?"],
        ),
        (
            'store={"type": "local", "settings": {"pth": "results"}},',
            ["store.settings (local store): unknown setting 'pth'", "did you mean 'path'?"],
        ),
        (
            'store={"type": "s3", "settings": {"bucket": "b", "endpont_url": "http://127.0.0.1:1"}},',
            ["unknown setting 'endpont_url'", "did you mean 'endpoint_url'?"],
        ),
        (
            'store={"type": "opensearch", "settings": {"url": "http://127.0.0.1:1", "indx": "r"}},',
            ["unknown setting 'indx'", "did you mean 'index'?"],
        ),
        ('judge={"modle": "gpt-4o"},', ["judge: unknown setting 'modle'", "did you mean 'model'?"]),
        ('traces={"sorce": "none"},', ["traces: unknown setting 'sorce'", "did you mean 'source'?"]),
        (
            'agents=[{"key": "shop", "connector": "demo"}, {"key": "shop", "connector": "demo"}],',
            ["agents[1]: duplicate agent key 'shop'", "versions of one agent go under its 'versions'"],
        ),
        (
            'agents=[{"key": "shop@v1", "connector": "demo"}],',
            ["agent key 'shop@v1' must be", "did you mean key 'shop' with versions={'v1': {}}?"],
        ),
        ('default_agent="dmeo@v2",', ["default_agent 'dmeo@v2'", "did you mean 'demo@v2'?"]),
        ('judge={"model": "opnai:gpt-4o"},', ["judge.model: 'opnai:gpt-4o'", "did you mean 'openai'?"]),
    ],
)
def test_a_configuration_typo_is_one_error_naming_the_key(tmp_path, evals, config_body, expected):
    project(tmp_path, evals, config_body)
    proc = cli_in_process("run", "evals", "--no-judge", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"error: {tmp_path / 'agent_health_config.py'}: invalid configuration: "), lines[0]
    for words in expected:
        assert words in lines[0], lines[0]
    assert not (tmp_path / ".agent_health" / "results").exists()  # nothing ran


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("AGENT_HEALTH_JUDGE_MODEL", "nope:xyz", "$AGENT_HEALTH_JUDGE_MODEL: 'nope:xyz' names no judge provider"),
        ("AGENT_HEALTH_JUDGE_MODEL", "opnai:gpt-4o", "did you mean 'openai'?"),
        ("AGENT_HEALTH_STORE", '{"type": "local", "settings": {"pth": "r"}}', "did you mean 'path'?"),
    ],
)
def test_a_typo_in_the_environment_is_an_error_naming_the_variable(tmp_path, evals, variable, value, expected):
    """`AGENT_HEALTH_JUDGE_MODEL=nope:xyz` was judged by the demo heuristic without a word."""
    project(tmp_path, evals, None)
    proc = cli_in_process("run", "evals", cwd=tmp_path, env={variable: value})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / ".agent_health" / "results").exists()


def test_a_judge_model_of_a_configured_provider_still_runs(tmp_path, evals):
    """The check is no broader than the typo: a known provider (or `demo`) by name is accepted."""
    project(tmp_path, evals, None)
    proc = cli_in_process("run", "evals", "--judge-model", "demo", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


AGENTS = """
agents=[{"key": "shop", "connector": "demo", "versions": {"v1": {}, "v2": {}, "v3": {}}, "default_version": "v2"}],
"""


@pytest.mark.parametrize(
    ("agents", "config_body", "ran"),
    [
        (["demo"], None, ["demo@v2"]),  # the configured default version of the built-in agent
        (["demo", "demo@v2"], None, ["demo@v2"]),  # the same version twice runs once
        (["demo@v1", "demo"], None, ["demo@v1", "demo@v2"]),
        (["shop"], AGENTS, ["shop@v2"]),  # the agent's default_version
    ],
)
def test_an_agent_key_without_a_version_runs_its_default_version(tmp_path, evals, agents, config_body, ran):
    """`--agent demo` printed a 54-line ExceptionGroup traceback ending in KeyError: 'demo@v2'."""
    project(tmp_path, evals, config_body)
    flags = [arg for ref in agents for arg in ("--agent", ref)]
    proc = cli_in_process("run", "evals", *flags, "--no-judge", "--reporter", "json=report.json", cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert sorted(r["agent"] for r in report["results"]) == ran
    assert sorted(s["agent"] for s in report["summaries"]) == ran


def test_an_unknown_agent_key_lists_the_known_versions(tmp_path, evals):
    project(tmp_path, evals, AGENTS)
    proc = cli_in_process("run", "evals", "--agent", "shp", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        "error: unknown agent 'shp'; known: demo@v1, demo@v2, shop@v1, shop@v2, shop@v3; did you mean 'shop'?"
    )
