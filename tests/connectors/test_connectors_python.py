"""The python connector: module:function, sync or async, returning text, a dict or a RunResult."""

from __future__ import annotations

from tests.connectors import py_agent
from tests.connectors.servers import invoke, invoke_error, runtime


def test_sync_function_returning_text():
    r = invoke(
        runtime("python", function="tests.connectors.py_agent:sync_agent"),
        "hi",
        context=({"description": "a", "value": "b"},),
    )
    assert r.output == "sync answer to hi with 1 context items"
    assert py_agent.CALLS[-1] == {"prompt": "hi", "run_id": r.run_id}


def test_async_function_returning_dict():
    r = invoke(runtime("python", function="tests.connectors.py_agent:async_agent"), "q", provisioned={"x": 1})
    assert r.output == "async answer to q" and r.first_tool_call("lookup").args == {"x": 1}
    assert r.usage.total_tokens == 5


def test_function_returning_run_result_and_callable_setting():
    r = invoke(runtime("python", function=py_agent.full_agent))
    assert r.output == "full" and r.agent == "agent@v1" and r.usage.model == "py-model"
    assert [(s.kind, s.role) for s in r.trajectory] == [
        ("message", "user"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("message", "assistant"),
    ]


def test_the_run_the_connector_checked_is_the_run_the_test_gets():
    """The connector builds the whole run (the prompt as its first step, when it started): the
    runtime returns that very object, whose JSON its secrets check made and kept, so the result
    holding it does not encode it again."""
    import asyncio
    import time

    from agent_health.model import RunResult
    from agent_health.model.agent import AgentRequest
    from agent_health.model.json_bytes import model_json

    rt = runtime("python", function="tests.connectors.py_agent:async_agent")
    checked: list[RunResult] = []
    scrub = rt.connector.scrub
    rt.connector.scrub = lambda run: checked.append(scrub(run)) or checked[-1]

    async def go() -> RunResult:
        try:
            return await rt.invoke(AgentRequest(prompt="q", provisioned={"x": 1}))
        finally:
            await rt.aclose()

    before = time.time()
    run = asyncio.run(go())
    assert run is checked[0]
    first = run.trajectory[0]
    assert (first.kind, first.role, first.content) == ("message", "user", "q")
    assert before <= run.started_at <= time.time() and run.agent == "agent@v1"
    remembered = RunResult.__dict__["_json"].__get__(run)
    assert remembered == run.model_dump_json()
    run.forget_json()
    assert model_json(run).decode() == remembered


def test_raising_and_slow_functions():
    msg = invoke_error(runtime("python", function="tests.connectors.py_agent:broken_agent"))
    assert msg == ("agent agent@v1 (tests.connectors.py_agent:broken_agent): raised RuntimeError: vector store offline")
    msg = invoke_error(runtime("python", function="tests.connectors.py_agent:slow_agent", timeout_s=0.2))
    assert "did not return within timeout_s=0.2s" in msg


def test_bad_function_reference_names_setting():
    import pytest

    from agent_health.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"agents\.agent\.settings\.function: 'tests\.connectors\.py_agent' has "
        r"no attribute 'nope'",
    ):
        runtime("python", function="tests.connectors.py_agent:nope")
    with pytest.raises(ConfigError, match=r"agents\.agent\.settings\.function: cannot import 'no_such_mod'"):
        runtime("python", function="no_such_mod:f")


# -- the contract as docs/connectors.md gives it ---------------------------------------------------

PROJECT_EVAL = """
from agent_health import expect, test

@test("payment", prompt="Why is the payment service failing?",
      context=[{"description": "Error log", "value": "refused"}])
async def payment(agent):
    result = await agent.run()
    expect(result).to_have_called_tool("search_logs", {"service": "payment"})
"""


def _run_project(root, agent_source: str, config_source: str, module: str = "my_agents/rca.py"):
    import sys

    from agent_health import load_config, load_tests, run_tests
    from agent_health.model import RunSettings

    for name in [m for m in sys.modules if m == "my_agents" or m.startswith("my_agents.")]:
        del sys.modules[name]  # each test's project has its own my_agents/rca.py

    (root / module).parent.mkdir(parents=True, exist_ok=True)
    (root / module).write_text(agent_source)
    (root / "agent_health_config.py").write_text(config_source)
    (root / "evals").mkdir()
    (root / "evals" / "rca.eval.py").write_text(PROJECT_EVAL)
    config = load_config(root / "agent_health_config.py")
    tests = load_tests([root / "evals"]).tests
    (result,) = run_tests(tests, config, settings=RunSettings(store=None, judge={"skip": True}))
    return result


def test_the_documented_python_agent_reports_its_steps_and_usage(tmp_path):
    from tests.core.test_docs_examples import block

    agent = block("connectors.md", "# my_agents/rca.py: a python agent")
    config = block("connectors.md", "# agent_health_config.py: the function above")
    result = _run_project(tmp_path, agent, config)
    assert result.status == "passed", result.signals
    run = result.run
    assert [(s.kind, s.role) for s in run.trajectory] == [
        ("message", "user"),
        ("thinking", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("message", "assistant"),
    ]
    assert run.tool_calls()[0].args == {"service": "payment"}
    assert run.steps_of_type("tool_result")[0].content == "Connection refused to db-primary:5432"
    assert (run.usage.input_tokens, run.usage.output_tokens, run.usage.model) == (1200, 80, "gpt-4o-mini")


def test_a_python_agent_returning_only_text_is_told_it_returned_no_steps(tmp_path):
    from tests.core.test_docs_examples import block

    config = block("connectors.md", "# agent_health_config.py: the function above")
    text_only = "async def run(prompt):\n    return 'The payment service cannot reach its database.'\n"
    result = _run_project(tmp_path, text_only, config)
    assert result.status == "failed"
    (signal,) = [s for s in result.signals if s.name.startswith("to_have_called_tool")]
    assert signal.reasoning == (
        "tool 'search_logs' with {'service': 'payment'} was not called; called: []; the agent returned no steps, "
        "only its answer text, so its tool calls cannot be seen (a python agent returns them in a dict with "
        "`steps` or `tool_calls`, or as a RunResult; docs/connectors.md#the-python-connector)"
    )


def test_an_agent_with_steps_but_not_the_tool_gets_no_such_note(tmp_path):
    from tests.core.test_docs_examples import block

    config = block("connectors.md", "# agent_health_config.py: the function above")
    other = (
        "def run(prompt):\n"
        "    return {'output': 'db down', 'tool_calls': [{'name': 'get_metrics', 'args': {}, 'result': 'cpu 9%'}]}\n"
    )
    result = _run_project(tmp_path, other, config)
    (signal,) = [s for s in result.signals if s.name.startswith("to_have_called_tool")]
    assert signal.reasoning == "tool 'search_logs' with {'service': 'payment'} was not called; called: ['get_metrics']"
