"""One precedence rule for RunSettings: a test's own timeout=/epochs=, then flags (or run config),
then environment variables, then the configuration file, then the defaults. Bad values name
where they came from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_health import ConfigError, RunReport, build_settings, define_config, load_tests
from agent_health.model import StoreSettings
from agent_health.session import ENV_VARS
from tests.support.cli import cli_in_process

from ..conftest import ROOT
from ..core.helpers import run_engine

CONFIG = define_config(timeout_s=30, epochs=2, concurrency=3, replay="record", store={"type": "local"})
ENV = {"AGENT_HEALTH_TIMEOUT": "20", "AGENT_HEALTH_EPOCHS": "3", "AGENT_HEALTH_CONCURRENCY": "5"}


def test_defaults_then_configuration_then_environment_then_explicit_values():
    plain = build_settings(define_config(), environ={})
    assert (plain.timeout_s, plain.epochs, plain.concurrency, plain.replay) == (120.0, 1, 8, "off")
    assert plain.store == StoreSettings() and plain.judge.cache and not plain.judge.skip

    from_config = build_settings(CONFIG, environ={})
    assert (from_config.timeout_s, from_config.epochs, from_config.concurrency, from_config.replay) == (
        30,
        2,
        3,
        "record",
    )
    from_env = build_settings(CONFIG, environ={**ENV, "AGENT_HEALTH_REPLAY": "auto"})
    assert (from_env.timeout_s, from_env.epochs, from_env.concurrency, from_env.replay) == (20, 3, 5, "auto")

    explicit = build_settings(
        CONFIG, {"timeout_s": 10, "epochs": 4, "concurrency": None, "replay": "strict"}, environ=ENV
    )
    assert (explicit.timeout_s, explicit.epochs, explicit.replay) == (10, 4, "strict")
    assert explicit.concurrency == 5  # None means "not given": the environment's value stands


def test_judge_store_and_flags_follow_the_same_rule():
    env = {
        "AGENT_HEALTH_SKIP_JUDGE": "yes",
        "AGENT_HEALTH_JUDGE_MODEL": "openai:gpt-4o-mini",
        "AGENT_HEALTH_NO_CACHE": "1",
    }
    s = build_settings(define_config(), environ=env)
    assert s.judge.skip and s.judge.model == "openai:gpt-4o-mini" and not s.judge.cache
    s = build_settings(define_config(), {"judge_model": "demo", "no_cache": False, "skip_judge": False}, environ=env)
    assert not s.judge.skip and s.judge.model == "demo" and s.judge.cache
    assert build_settings(define_config(), {"judge": {"skip": True}}, environ={}).judge.skip

    assert build_settings(define_config(), environ={"AGENT_HEALTH_STORE": "none"}).store is None
    spec = '{"type": "local", "settings": {"path": "elsewhere"}}'
    assert build_settings(define_config(), environ={"AGENT_HEALTH_STORE": spec}).store.settings == {"path": "elsewhere"}
    assert build_settings(define_config(), {"no_store": True}, environ={"AGENT_HEALTH_STORE": spec}).store is None
    assert build_settings(define_config(), {"store": "local"}, environ={"AGENT_HEALTH_STORE": "none"}).store.type == (
        "local"
    )
    s = build_settings(define_config(), {"fail_fast": True, "labels": "smoke", "agents": ["demo@v1"]}, environ={})
    assert s.fail_fast and s.labels == ("smoke",) and s.agents == ("demo@v1",)


@pytest.mark.parametrize(
    "env, message",
    [
        ({"AGENT_HEALTH_CONCURRENCY": "lots"}, "$AGENT_HEALTH_CONCURRENCY='lots': expected a whole number"),
        ({"AGENT_HEALTH_CONCURRENCY": "0"}, "$AGENT_HEALTH_CONCURRENCY: Input should be greater than or equal to 1"),
        ({"AGENT_HEALTH_TIMEOUT": "soon"}, "$AGENT_HEALTH_TIMEOUT='soon': expected a number of seconds"),
        ({"AGENT_HEALTH_TIMEOUT": "-5"}, "$AGENT_HEALTH_TIMEOUT: Input should be greater than 0"),
        ({"AGENT_HEALTH_EPOCHS": "0"}, "$AGENT_HEALTH_EPOCHS: Input should be greater than or equal to 1"),
        ({"AGENT_HEALTH_SKIP_JUDGE": "maybe"}, "$AGENT_HEALTH_SKIP_JUDGE='maybe': expected one of 1, true"),
        ({"AGENT_HEALTH_REPLAY": "sometimes"}, "$AGENT_HEALTH_REPLAY: unknown replay mode 'sometimes'"),
        (
            {"AGENT_HEALTH_STORE": "floppy"},
            "$AGENT_HEALTH_STORE.type: unknown result store 'floppy' (known: local, s3, opensearch;",
        ),
        ({"AGENT_HEALTH_STORE": "{nope"}, "$AGENT_HEALTH_STORE: not a JSON object"),
    ],
)
def test_bad_environment_values_name_the_variable(env, message):
    with pytest.raises(ConfigError) as info:
        build_settings(define_config(), environ=env)
    assert str(info.value).startswith(message), str(info.value)


def test_bad_explicit_values_name_the_setting():
    with pytest.raises(ConfigError, match=r"^concurrency: Input should be greater than or equal to 1 \(got 0\)"):
        build_settings(define_config(), {"concurrency": 0}, environ={})
    with pytest.raises(ConfigError, match=r"^unknown run setting 'concurency'"):
        build_settings(define_config(), {"concurency": 4}, environ={})


def test_a_tests_own_timeout_and_epochs_win_over_the_run(write_eval, tmp_path):
    write_eval(
        "own.eval.py",
        """
        import asyncio
        from agent_health import test

        @test("own", timeout=0.3, epochs=2)
        async def own():
            await asyncio.sleep(1)

        @test("run's")
        async def runs():
            await asyncio.sleep(0.5)
        """,
    )
    res, _ = run_engine(load_tests([tmp_path / "evals"]).tests, timeout_s=5, epochs=3)
    own, runs = res["own"], res["run's"]
    assert own.epochs == 2 and own.status == "failed" and "within 0.3s" in own.error  # its own 0.3 s, not 5 s
    assert runs.epochs == 3 and runs.status == "passed"  # the run's 5 s and 3 epochs


def test_the_cli_applies_the_rule(tmp_path):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "e.eval.py").write_text("from agent_health import test\n@test('t')\ndef t():\n    pass\n")
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config(epochs=2)\n"
    )

    def epochs(*args: str, env: dict[str, str] | None = None) -> int:
        p = cli_in_process("run", "evals", "--no-store", "--reporter", "json", *args, cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stderr
        return RunReport.model_validate_json(p.stdout).results[0].epochs

    assert epochs() == 2  # configuration over the default
    assert epochs(env={"AGENT_HEALTH_EPOCHS": "3"}) == 3  # environment over configuration
    assert epochs("--epochs", "4", env={"AGENT_HEALTH_EPOCHS": "3"}) == 4  # flag over environment
    p = cli_in_process("run", "evals", cwd=tmp_path, env={"AGENT_HEALTH_TIMEOUT": "soon"})
    assert p.returncode == 2 and "error: $AGENT_HEALTH_TIMEOUT='soon': expected a number of seconds" in p.stderr


def test_docs_name_every_environment_variable_and_the_rule():
    doc = (Path(ROOT) / "docs" / "running.md").read_text()
    for var in ENV_VARS:
        assert f"`{var}`" in doc, f"docs/running.md does not document {var}"
    rule = re.search(r"## Precedence.*?(?=\n## )", doc, re.S)
    assert rule and all(w in rule.group(0) for w in ("timeout=", "epochs=", "flag", "environment", "configuration"))


def test_the_python_example_in_docs_running_runs(tmp_path, monkeypatch, capsys):
    doc = (Path(ROOT) / "docs" / "running.md").read_text()
    (example,) = re.findall(r"```python\n(.*?)```", doc, re.S)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "e.eval.py").write_text(
        "from agent_health import test, expect\n@test('t')\ndef t():\n    expect(1).to_equal(1)\n"
    )
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "docs/running.md", "exec"), {})
    assert "finished [('demo@v1', 1, 0), ('demo@v2', 1, 0)]" in capsys.readouterr().out
    assert not (tmp_path / ".agent_health" / "results").exists()  # "store": "none"


def test_the_runs_judge_model_routes_every_judge_call(write_eval, tmp_path):
    from tests.judges.helpers import ScriptedServer, chat, verdict_json

    server = ScriptedServer()
    server.default = lambda r: chat(verdict_json())
    try:
        write_eval(
            "j.eval.py",
            """
            from agent_health import test

            @test("judged", prompt="Diagnose why the payment service is failing.")
            async def judged(agent, judge):
                await judge(await agent.run(), "names the database")
            """,
        )
        config = define_config(
            root=str(tmp_path),
            judge={"providers": {"local": {"type": "openai", "base_url": server.url + "/v1"}}},
        )
        tests = load_tests([tmp_path / "evals"]).tests
        res, _ = run_engine(tests, config=config)
        assert res["judged"].signals[0].evidence["evaluator"] == "demo" and server.requests == []
        settings = build_settings(config, {"judge_model": "local:judge-x"}, environ={})
        res, _ = run_engine(tests, config=config, judge={"model": settings.judge.model})
        assert [r.json["model"] for r in server.requests] == ["judge-x"]
        assert res["judged"].status == "passed"
    finally:
        server.close()
