"""Registries and entry points: a third-party package adds a connector, judge providers, a reporter
and a result store with one module each plus entry points, and a run uses them.

The fixture package tests/fixtures/ah_plugin is installed by pip (`pip install --target`, offline,
built by the test venv's setuptools and wheel) into a folder put on the path: its code and the
`.dist-info` pip writes from its pyproject.toml's entry points. The test venv itself is left alone
(a test checks the kinds are unknown without the plugin), and importlib.metadata finds the plugin by
the real entry-point mechanism.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_health import define_config, load_tests, run_tests
from agent_health.errors import ConfigError
from agent_health.registry import REGISTRY_MODULES, registry
from agent_health.stores import LocalResultStore
from tests.conftest import ROOT, run_cli

PLUGIN = ROOT / "tests" / "fixtures" / "ah_plugin"
GROUPS = list(REGISTRY_MODULES)


def install(project: Path, site: Path) -> Path:
    """`pip install` `project` into the folder `site` (its code and the .dist-info with the entry
    points its pyproject.toml declares), built from a copy so the fixture's tree stays clean.
    Returns `site`."""
    src = site.parent / f"{project.name}-src"
    shutil.copytree(project, src, dirs_exist_ok=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    proc = subprocess.run([*pip, "--target", str(site), str(src)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return site


def reset_registries() -> None:
    for group in GROUPS:
        registry(group).reset()


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory) -> Path:
    return install(PLUGIN, tmp_path_factory.mktemp("plugin") / "site")


@pytest.fixture
def on_path(monkeypatch):
    """Put site folders on sys.path for one test; the registries read entry points afresh."""

    def add(site: Path) -> None:
        monkeypatch.syspath_prepend(str(site))
        reset_registries()

    yield add
    monkeypatch.undo()
    reset_registries()
    for name in [m for m in sys.modules if m.split(".")[0] in ("ah_plugin", "my_agents")]:
        del sys.modules[name]


EVALS = """
from agent_health import test, expect

@test("disk", prompt="Why is checkout down?")
async def disk(agent, judge):
    result = await agent.run()
    expect(result.output).to_contain("ORACLE:")
    await judge(result, "names the root cause")
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{{"key": "seer", "connector": "oracle",
              "versions": {{"v1": {{"answer": "the disk is full"}}, "v2": {{"answer": "all is well"}}}}}}],
    default_agent="seer@v1",
    judge={{"provider": "keyword", "model": "kw-1", "settings": {{"keyword": "the disk is full"}}}},
    store={{"type": "folder", "settings": {{"path": {store!r}}}}},
)
"""


def project(root: Path) -> Path:
    (root / "evals").mkdir(parents=True, exist_ok=True)
    (root / "evals" / "disk.eval.py").write_text(EVALS)
    (root / "agent_health_config.py").write_text(CONFIG.format(store=str(root / "folder-store")))
    return root


def test_a_cli_run_uses_the_plugins_connector_judge_reporter_and_store(plugin_site, tmp_path):
    root = project(tmp_path)
    proc = run_cli(
        *("run", "evals", "--agent", "seer@v1", "--agent", "seer@v2"),
        *("--reporter", "json=report.json", "--reporter", "tally=tally.txt"),
        cwd=root,
        env={"PYTHONPATH": f"{ROOT}:{plugin_site}"},
    )
    # v2's answer lacks the keyword: the plugin judge fails it, so the run exits 1
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((root / "report.json").read_text())
    results = {r["agent"]: r for r in report["results"]}
    assert {a: r["status"] for a, r in results.items()} == {"seer@v1": "passed", "seer@v2": "failed"}
    assert results["seer@v1"]["run"]["output"].startswith("ORACLE: the disk is full (asked: Why is checkout down?)")
    verdicts = {a: [s for s in r["signals"] if s["kind"] == "judge"] for a, r in results.items()}
    assert "keyword judge (kw-1): 'the disk is full' found" in json.dumps(verdicts["seer@v1"])
    assert "keyword judge (kw-1): 'the disk is full' missing" in json.dumps(verdicts["seer@v2"])
    assert (root / "tally.txt").read_text() == "1/2\n"  # the plugin reporter saw both results
    stored = LocalResultStore(root / "folder-store")  # the plugin store wrote where it was told
    assert sorted(k.agent for k in stored.list()) == ["seer@v1", "seer@v2"]
    assert not (root / ".agent_health" / "results").exists()


def test_the_session_api_uses_a_plugin_provider_that_gives_verdicts_itself(plugin_site, on_path, tmp_path):
    on_path(plugin_site)
    root = project(tmp_path)
    tests = load_tests([root / "evals"]).tests

    def run(min_chars: int) -> str:
        config = define_config(
            root=str(root),
            agents=[{"key": "seer", "connector": "oracle", "versions": {"v1": {"answer": "the disk is full"}}}],
            default_agent="seer@v1",
            judge={"provider": "long", "providers": {"long": {"type": "length", "min_chars": min_chars}}},
        )
        (result,) = run_tests(tests, config, "seer@v1")
        (verdict,) = [s for s in result.signals if s.kind == "judge"]
        assert f"needs {min_chars}" in json.dumps(verdict.model_dump(mode="json")), verdict
        return result.status

    assert run(20) == "passed"
    assert run(500) == "failed"


def test_an_unknown_kind_is_one_error_listing_the_known_ones_plugins_included(plugin_site, on_path, tmp_path):
    on_path(plugin_site)
    config = define_config(
        agents=[{"key": "seer", "connector": "oracle"}],
        default_agent="seer@default",
        judge={"provider": "keyword", "model": "kw-1"},
        store={"type": "folder", "settings": {"path": str(tmp_path)}},
    )
    assert config.judge.provider == "keyword"
    assert [m for m in sys.modules if m.startswith("ah_plugin")] == []  # checked without importing the plugin

    with pytest.raises(ConfigError) as err:
        define_config(agents=[{"key": "seer", "connector": "oracel"}], default_agent="seer@default")
    message = str(err.value)
    assert "unknown connector 'oracel'; did you mean 'oracle'?" in message
    assert (
        "known: demo, http, agui, subprocess, python, claude, pydantic_ai, langgraph, langchain, openai_agents, oracle;"
        in message
    )
    assert "'agent_health.connectors' entry points" in message

    with pytest.raises(ConfigError, match=r"judge.provider 'keywrd' unknown; did you mean 'keyword'\?") as err:
        define_config(judge={"provider": "keywrd"})
    assert "['demo', 'openai', 'bedrock', 'keyword', 'length']" in str(err.value)
    with pytest.raises(ConfigError, match=r"judge.providers\['x'\]: type 'grok' unknown.*'length'"):
        define_config(judge={"providers": {"x": {"type": "grok"}}})
    with pytest.raises(ConfigError, match=r"store.type: unknown result store 'foldr'; did you mean 'folder'\?"):
        define_config(store={"type": "foldr"})

    from click import UsageError

    from agent_health.cli.run import build_reporters

    with pytest.raises(UsageError, match=r"unknown reporter 'taly'; use summary, json\[=FILE\].* tally\[=FILE\]"):
        build_reporters(["taly"], verbose=False)


def test_without_the_plugin_its_kinds_are_unknown_and_there_is_no_silent_fallback(tmp_path):
    reset_registries()
    with pytest.raises(
        ConfigError,
        match=r"unknown connector 'oracle' \(known: demo, http, agui, subprocess, python, claude, pydantic_ai, "
        r"langgraph, langchain, openai_agents;",
    ):
        define_config(agents=[{"key": "seer", "connector": "oracle"}])
    with pytest.raises(ConfigError, match=r"judge.providers\['k'\]: type 'keyword' unknown; use one of \['demo'"):
        define_config(judge={"providers": {"k": {"type": "keyword"}}})
    root = project(tmp_path)
    proc = run_cli("run", "evals", cwd=root)
    # one error naming the file and the setting, as every configuration error does
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {root / 'agent_health_config.py'}: invalid configuration: "), proc.stderr
    assert "store.type: unknown result store 'folder' (known: local, s3, opensearch;" in proc.stderr


def test_a_run_on_built_in_kinds_never_reads_entry_points(tmp_path, write_eval):
    write_eval("one.eval.py", EVALS.replace('expect(result.output).to_contain("ORACLE:")', "pass"))
    reset_registries()
    config = define_config(root=str(tmp_path), store={"type": "local"}, judge={"provider": "demo"})
    (result,) = run_tests(load_tests([tmp_path / "evals"]).tests, config, "demo@v2")
    assert result.status in ("passed", "failed") and "judge" in [s.kind for s in result.signals]
    assert [group for group in GROUPS if registry(group).scanned] == []


def test_a_judge_service_never_gives_an_unknown_kind_a_bedrock_client(plugin_site, on_path):
    """A kind left out of the old if/else silently got a Bedrock client: every kind now gets its own class."""
    from agent_health.config.model import JudgeSettings
    from agent_health.judges.service import JudgeService

    on_path(plugin_site)
    service = JudgeService.from_settings(JudgeSettings(provider="keyword", model="kw-1"))
    assert type(service.client("kw-1")).__name__ == "KeywordChat"
    assert type(service.client("openai:gpt-x")).__name__ == "OpenAIChat"
    assert type(service.resolve("length")).__name__ == "LengthJudge"
    assert service.client("length") is None  # a provider that gives verdicts itself takes no chat client


def test_a_custom_evaluator_gets_the_plugin_llm_and_a_clear_error_without_one(plugin_site, on_path):
    """The `llm` helper of custom evaluators asks an installed LLM provider; a provider that gives
    verdicts itself has no model to ask, and the evaluator's verdict says so."""
    import asyncio

    from agent_health.config.model import JudgeSettings
    from agent_health.judges.service import JudgeService
    from agent_health.model.judge import JudgeRequest

    on_path(plugin_site)

    async def asks(llm):
        answer = json.loads(await llm.complete("<<<UNTRUSTED OUTPUT 0123456789abcdef>>>\nthe disk is full"))
        return {"pass": answer["pass"], "reasoning": answer["reasoning"]}

    async def verdict(**judge):
        service = JudgeService.from_settings(JudgeSettings(**judge), evaluators={"asks": asks})
        try:
            return await service.judge(JudgeRequest(criteria="c", output="o", evaluator="asks"))
        finally:
            await service.aclose()

    v = asyncio.run(verdict(provider="keyword", model="kw-1", settings={"keyword": "disk"}, cache=False))
    assert v.passed and not v.errored and "keyword judge (kw-1): 'disk' found" in v.reasoning
    v = asyncio.run(verdict(provider="length"))
    assert v.errored and "'length', which gives verdicts itself and has no model to ask" in v.error


def test_plugin_problems_name_the_distribution(on_path, tmp_path):
    """A broken target, two packages claiming one kind, and a package shadowing a built-in."""
    for name, entries in {
        "broken": "[agent_health.connectors]\nghost = my_agents.missing:Ghost\n",
        "one": "[agent_health.judges]\ntwin = my_agents.a:A\n",
        "two": "[agent_health.judges]\ntwin = my_agents.b:B\n",
        "shadow": "[agent_health.connectors]\nhttp = my_agents.http:Mine\n",
    }.items():
        dist = tmp_path / f"{name}-1.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (dist / "entry_points.txt").write_text(entries)
    on_path(tmp_path)
    connectors, judges = registry("agent_health.connectors"), registry("agent_health.judges")
    with pytest.warns(UserWarning, match=r"shadow 1.0 declares connector 'http'.*the built-in 'http' is kept"):
        assert connectors.kinds().count("http") == 1
    assert connectors.target("http") == "agent_health.connectors.http:HttpConnector"
    with pytest.raises(ConfigError, match=r"connector 'ghost' from broken 1.0 .* cannot be loaded: ModuleNotFound"):
        connectors.load("ghost")
    with pytest.raises(ConfigError, match=r"judge provider 'twin' is declared differently by one 1.0 and two 1.0"):
        judges.load("twin")


def test_the_extending_docs_example_is_a_working_plugin(on_path, tmp_path):
    """docs/extending.md: its package (pyproject.toml entry points and module) installed, its
    configuration runs an eval with the documented connector and judge provider."""
    from tests.core.test_docs_examples import block

    pyproject = block("extending.md", "[project]")
    module = block("extending.md", '"""my_agents/plugin.py')
    config = block("extending.md", "# agent_health_config.py")
    src = tmp_path / "src"
    (src / "my_agents").mkdir(parents=True)
    (src / "pyproject.toml").write_text(pyproject)
    (src / "my_agents" / "__init__.py").write_text("")
    (src / "my_agents" / "plugin.py").write_text(module)
    site = install(src, tmp_path / "site")
    root = tmp_path / "project"
    (root / "evals").mkdir(parents=True)
    (root / "agent_health_config.py").write_text(config)
    (root / "evals" / "echo.eval.py").write_text(
        textwrap.dedent(
            """
            from agent_health import test, expect

            @test("echo", prompt="ping")
            async def echo(agent, judge):
                result = await agent.run()
                expect(result.output).to_equal("echo: ping")
                await judge(result, "answers with the prompt")
            """
        )
    )
    proc = run_cli("run", "evals", "--reporter", "json", cwd=root, env={"PYTHONPATH": f"{ROOT}:{site}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = json.loads(proc.stdout)["results"]
    assert result["agent"] == "echo@v1" and result["status"] == "passed"
    assert "the output is not empty" in json.dumps([s for s in result["signals"] if s["kind"] == "judge"])
