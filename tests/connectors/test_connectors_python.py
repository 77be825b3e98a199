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
