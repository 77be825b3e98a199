"""pydantic-ai's own AG-UI adapter under uvicorn on 127.0.0.1, served as docs/connectors.md gives it:
the test's context reaches the agent (sent as a message: the adapter ignores RunAgentInput.context),
the usage it reports on RUN_FINISHED lands with the model, and the empty assistant messages it
opens around tool calls are no steps."""

from __future__ import annotations

import sys

import pytest

from agent_health import load_config, load_tests, run_tests
from agent_health.model import RunSettings
from tests.connectors.servers import invoke, runtime
from tests.core.test_docs_examples import block
from tests.support import skip_or_fail

CONTEXT = ({"description": "Error log", "value": "Connection refused to db-primary:5432"},)
PROMPT = "Why is the payment service failing?"


@pytest.fixture(scope="module")
def agui_server():
    from tests.connectors.framework_agents import sre_pydantic_ai
    from tests.connectors.framework_agents.uvicorn_server import UvicornServer

    sys.modules["sre_agent"] = sre_pydantic_ai  # what the documented server imports its agent from
    namespace: dict = {}
    exec(block("connectors.md", "# server.py: a pydantic-ai agent over AG-UI"), namespace)
    try:
        server = UvicornServer(namespace["app"]).start()
    except (OSError, RuntimeError) as exc:
        skip_or_fail(f"cannot start uvicorn on 127.0.0.1: {exc}")
    yield server
    server.close()
    sys.modules.pop("sre_agent", None)


def test_the_context_usage_and_steps_of_pydantic_ais_adapter_land(agui_server):
    r = invoke(runtime("agui", endpoint=agui_server.url + "/agent", context_as="message"), PROMPT, context=CONTEXT)
    assert r.output.strip() == (
        "The payment service cannot reach its database. The test's context says: Connection refused to db-primary:5432"
    )
    assert [(s.kind, s.role) for s in r.trajectory] == [
        ("message", "user"),
        ("thinking", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("message", "assistant"),
    ]  # the adapter's empty TEXT_MESSAGE_START/END before the tool call is no step
    assert r.tool_calls()[0].args == {"service": "payment"}
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.model) == (100, 29, "sre-function-model")
    assert not r.usage.unreported


def test_the_adapter_ignores_run_agent_input_context(agui_server):
    """Why `context_as: "message"` exists: sent in `context`, the agent never sees it."""
    r = invoke(runtime("agui", endpoint=agui_server.url + "/agent"), PROMPT, context=CONTEXT)
    assert r.output.strip().endswith("The test's context says: (none)")


def test_the_documented_agui_configuration_runs_an_eval(agui_server, tmp_path):
    config = block("connectors.md", "# agent_health_config.py: the AG-UI server above")
    (tmp_path / "agent_health_config.py").write_text(config.replace("http://127.0.0.1:8000", agui_server.url))
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "sre.eval.py").write_text(
        "from agent_health import expect, test\n\n"
        f"@test('payment', prompt={PROMPT!r}, context={list(CONTEXT)!r})\n"
        "async def payment(agent):\n"
        "    result = await agent.run()\n"
        "    expect(result).to_have_called_tool('search_logs', {'service': 'payment'})\n"
        "    expect(result.output).to_contain('Connection refused to db-primary:5432')\n"
        "    expect(result.usage.total_tokens).to_equal(129)\n"
    )
    (result,) = run_tests(
        load_tests([tmp_path / "evals"]).tests,
        load_config(tmp_path / "agent_health_config.py"),
        settings=RunSettings(store=None, judge={"skip": True}),
    )
    assert result.status == "passed", (result.error, [(s.name, s.reasoning) for s in result.signals])
    assert result.cost_usd is None  # a model with no price: unknown, never $0
