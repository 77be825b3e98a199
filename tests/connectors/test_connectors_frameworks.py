"""Framework agents named directly, with no glue module: a pydantic-ai Agent (on its FunctionModel),
a LangGraph graph (on a fake chat model with tool calls) and an OpenAI Agents SDK Agent (on a local
OpenAI-compatible server) run the same eval file through the CLI and the headless Dagster job, and
their stored results hold the tool calls with arguments, thinking, usage and the model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent_health.stores import LocalResultStore
from tests.conftest import ROOT, run_cli
from tests.connectors.framework_agents import chat_server
from tests.core.test_docs_examples import block
from tests.support import skip_or_fail

AGENTS = Path(__file__).parent / "framework_agents"
VERSIONS = ("pyai@v1", "graph@v1", "oai@v1")


EVAL = """
from agent_health import expect, test

@test("payment", prompt="Why is the payment service failing?",
      context=[{"description": "Error log", "value": "Connection refused to db-primary:5432"}])
async def payment(agent):
    result = await agent.run()
    expect(result).to_have_called_tool("search_logs", {"service": "payment"})
    expect(result).to_have_steps_of_type("thinking")
    expect(result.output).to_contain("cannot reach its database")
    expect(result.output).to_contain("Connection refused to db-primary:5432")  # the context reached the model
"""


def make_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in ("sre_pydantic_ai.py", "sre_langgraph.py", "sre_openai_agents.py"):
        shutil.copy(AGENTS / name, root / name)
    config = block("connectors.md", "# agent_health_config.py: three framework agents")
    (root / "agent_health_config.py").write_text(config)
    (root / "evals").mkdir()
    (root / "evals" / "payments.eval.py").write_text(EVAL)
    return root


@pytest.fixture(scope="module")
def model_server():
    try:
        srv = chat_server.start()
    except (OSError, RuntimeError) as exc:
        skip_or_fail(f"cannot start the OpenAI-compatible server on 127.0.0.1: {exc}")
    yield srv
    srv.close()


@pytest.fixture
def framework_env(model_server, monkeypatch):
    env = {"SRE_OPENAI_BASE_URL": model_server.url + "/v1", "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


EXPECTED_MODELS = {"pyai@v1": "sre-function-model", "graph@v1": "sre-fake-chat", "oai@v1": "gpt-4o-mini"}


def check_stored(project: Path) -> None:
    store = LocalResultStore(project / ".agent_health" / "results")
    results = {r.agent: r for r in store.load()}
    assert sorted(results) == sorted(VERSIONS)
    for version, result in results.items():
        assert result.status == "passed", (version, result.error, [s.reasoning for s in result.signals])
        run = result.run
        assert [(s.kind, s.role) for s in run.trajectory] == [
            ("message", "user"),
            ("thinking", "assistant"),
            ("tool_call", "assistant"),
            ("tool_result", "tool"),
            ("message", "assistant"),
        ], version
        call, returned = run.trajectory[2], run.trajectory[3]
        assert (call.tool, call.args) == ("search_logs", {"service": "payment"}), version
        assert (returned.tool, returned.call_id, returned.content) == (
            "search_logs",
            call.call_id,
            "The payment service cannot reach its database.",
        ), version
        assert run.usage.model == EXPECTED_MODELS[version]
        assert run.usage.llm_calls == 2 and not run.usage.unreported, version
        assert run.usage.input_tokens > 0 and run.usage.output_tokens > 0, version
        assert run.usage.total_tokens == run.usage.input_tokens + run.usage.output_tokens
    # the fake models report exactly what they were given: LangChain's usage_metadata, OpenAI's usage
    assert (results["graph@v1"].run.usage.input_tokens, results["graph@v1"].run.usage.output_tokens) == (120, 37)
    assert (results["oai@v1"].run.usage.input_tokens, results["oai@v1"].run.usage.output_tokens) == (120, 37)
    assert results["oai@v1"].cost_usd and results["oai@v1"].cost_usd > 0  # a priced model: its cost is estimated


def test_framework_agents_run_through_the_cli_with_no_glue(tmp_path, framework_env):
    project = make_project(tmp_path)
    args = ["run", "evals", "--no-judge", *(a for v in VERSIONS for a in ("--agent", v))]
    p = run_cli(*args, cwd=project, env=framework_env, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    check_stored(project)


def test_framework_agents_run_in_the_headless_dagster_job(tmp_path, framework_env, monkeypatch, capsys):
    pytest.importorskip("dagster")
    from agent_health_dagster.headless import main

    project = make_project(tmp_path / "project")
    home = tmp_path / "home"
    monkeypatch.setenv("AGENT_HEALTH_CONFIG", str(project / "agent_health_config.py"))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.syspath_prepend(str(project))
    code = main(["--dagster-home", str(home), "--agents", ",".join(VERSIONS)])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    check_stored(project)


def test_a_framework_connector_names_what_the_agent_setting_is_instead(tmp_path):
    from agent_health.errors import ConfigError
    from tests.connectors.servers import runtime

    with pytest.raises(ConfigError) as info:
        runtime("pydantic_ai", agent="tests.connectors.framework_agents.sre_langgraph:graph", root=str(ROOT))
    assert str(info.value) == (
        "setting agents.agent.settings.agent: 'tests.connectors.framework_agents.sre_langgraph:graph' is a "
        "langgraph.graph.state.CompiledStateGraph, not a pydantic_ai.Agent (connector 'pydantic_ai')"
    )
    with pytest.raises(ConfigError, match=r"agents\.agent\.settings\.agent: cannot import 'no_such_module'"):
        runtime("langgraph", agent="no_such_module:graph")


def test_no_framework_is_imported_unless_an_agent_uses_it_and_a_missing_one_names_its_extra(tmp_path):
    import subprocess
    import sys

    script = """
import sys
from agent_health import define_config, load_tests, run_tests
from agent_health.model import RunSettings
config = define_config(agents=[], default_agent="demo@v2")
tests = load_tests([sys.argv[1]]).tests
(result,) = run_tests(tests, config, settings=RunSettings(store=None, judge={"skip": True}))
loaded = sorted(m for m in ("pydantic_ai", "langgraph", "langchain_core", "agents", "openai") if m in sys.modules)
print("loaded:", loaded)
sys.modules["pydantic_ai"] = None  # as if it were not installed
from agent_health.connectors.base import connector_class
try:
    connector_class("pydantic_ai")
except Exception as exc:
    print(type(exc).__name__, exc)
"""
    (tmp_path / "one.eval.py").write_text(
        "from agent_health import test\n\n@test('one', prompt='Why is checkout slow?')\n"
        "async def one(agent):\n    await agent.run()\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "one.eval.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "loaded: []",
        "ConfigError connector 'pydantic_ai' needs pydantic_ai, which is not installed: "
        "pip install 'agent-health[pydantic-ai]'",
    ]


@pytest.mark.parametrize(
    ("agent", "settings"),
    [("chain", {"input_key": "question"}), ("model", {})],
    ids=["prompt-template-chain", "chat-model"],
)
def test_langchain_runnables_that_are_no_graph_are_read_through_their_callbacks(agent, settings):
    from tests.connectors.servers import invoke, runtime

    rt = runtime("langchain", agent=f"tests.connectors.framework_agents.sre_langgraph:{agent}", **settings)
    r = invoke(rt, "Why is the payment service failing?", context=({"description": "Error log", "value": "x"},))
    assert [(s.kind, s.tool, s.args) for s in r.trajectory] == [
        ("message", None, None),
        ("thinking", None, None),
        ("tool_call", "search_logs", {"service": "payment"}),
    ]
    usage = r.usage
    assert (usage.input_tokens, usage.output_tokens, usage.model, usage.llm_calls) == (50, 12, "sre-fake-chat", 1)


DEPS_AGENT = """
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart(info.instructions)])), deps_type=dict)


@agent.instructions
def ticket(ctx: RunContext[dict]) -> str:
    return f"Ticket {ctx.deps['ticket']}."


async def make_deps(request):
    return {"ticket": request.provisioned["ticket"]}
"""


def test_settings_deps_gives_each_run_its_dependencies(tmp_path):
    from tests.connectors.servers import invoke, runtime

    (tmp_path / "deps_agent.py").write_text(DEPS_AGENT)
    rt = runtime("pydantic_ai", agent="deps_agent:agent", deps="deps_agent:make_deps", root=str(tmp_path))
    r = invoke(rt, "Which ticket?", provisioned={"ticket": "INC-42"})
    assert r.output == "Ticket INC-42."
