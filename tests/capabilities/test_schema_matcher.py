"""to_match_schema() on the jsonschema package: every keyword enforced, problems named with their JSON
path, and a broken schema an error instead of a silent pass."""

from __future__ import annotations

import json

import pytest

from agent_health import define_config, load_tests, run_tests
from agent_health.capabilities.context import TestContext, TestInfo, current_context, reset_context, set_context
from agent_health.capabilities.expect import expect
from agent_health.errors import ExpectationFailed
from agent_health.judges.service import JudgeService
from agent_health.model import TestCase

DEFS = {"$defs": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}}}

# keyword: (schema, a value that fits, a value that does not, the JSON path the failure names);
# values are JSON values (a Python str given to expect() is read as the agent's JSON text)
PROBES = {
    "pattern": (
        {"properties": {"host": {"type": "string", "pattern": "^db-[a-z]+$"}}},
        {"host": "db-primary"},
        {"host": "cache-1"},
        "$.host",
    ),
    "$ref": (
        {**DEFS, "type": "object", "properties": {"port": {"$ref": "#/$defs/port"}}},
        {"port": 5432},
        {"port": 70000},
        "$.port",
    ),
    "uniqueItems": ({"type": "array", "uniqueItems": True}, ["a", "b"], ["a", "a"], "$"),
    "not": ({"properties": {"retries": {"not": {"type": "string"}}}}, {"retries": 5}, {"retries": "five"}, "$.retries"),
    "if/then": (
        {"if": {"properties": {"severity": {"const": "high"}}}, "then": {"required": ["pager"]}},
        {"severity": "high", "pager": "oncall"},
        {"severity": "high"},
        "$",
    ),
    "multipleOf": ({"type": "number", "multipleOf": 0.5}, 2.5, 2.3, "$"),
    "nested": (
        {
            "type": "object",
            "properties": {"steps": {"type": "array", "items": {"type": "object", "required": ["tool"]}}},
        },
        {"steps": [{"tool": "search_logs"}]},
        {"steps": [{"tool": "search_logs"}, {"args": {}}]},
        "$.steps[1]",
    ),
}


@pytest.fixture
def running_test():
    """The context of a running test, so expect() records signals on it."""
    case = TestCase(id="s::t", name="t", suite="s", source_file="s.eval.py")
    info = TestInfo("s::t", "t", "s", (), None, "demo@v2")
    token = set_context(TestContext(case=case, info=info, runtime=None, judges=JudgeService()))
    try:
        yield current_context("test")
    finally:
        reset_context(token)


@pytest.mark.parametrize("keyword", sorted(PROBES))
def test_each_keyword_is_enforced_and_the_failure_names_its_json_path(running_test, keyword):
    schema, good, bad, path = PROBES[keyword]
    expect(good).to_match_schema(schema)
    assert running_test.signals[-1].passed is True
    with pytest.raises(ExpectationFailed):
        expect(bad).to_match_schema(schema)
    failed = running_test.signals[-1]
    assert failed.passed is False
    assert failed.reasoning.startswith(f"{path}: "), failed.reasoning
    # JSON text (the agent's output) is parsed before validation
    expect.soft(json.dumps(bad)).to_match_schema(schema)
    assert running_test.signals[-1].passed is False


def test_every_problem_is_listed_with_its_path(running_test):
    schema = {"type": "object", "required": ["service"], "properties": {"confidence": {"maximum": 1}}}
    expect.soft({"confidence": 3}).to_match_schema(schema)
    reasoning = running_test.signals[-1].reasoning
    assert "$: 'service' is a required property" in reasoning and "$.confidence: 3 is greater than" in reasoning


@pytest.mark.parametrize(
    "schema, problem",
    [
        ({"type": "object", "properties": {"service": {"type": "strng"}}}, "at $.properties.service.type: 'strng'"),
        ({"type": "string", "minLength": "3"}, "at $.minLength: '3' is not of type 'integer'"),
        ({"$ref": "#/$defs/missing"}, "reference cannot be resolved"),
    ],
)
def test_a_broken_schema_is_an_error_naming_the_problem_not_a_pass(running_test, schema, problem):
    with pytest.raises(ValueError, match="to_match_schema") as info:
        expect({"service": 1}).to_match_schema(schema)
    assert problem in str(info.value)
    assert running_test.signals == []  # nothing was recorded as passed


def test_a_typo_in_a_schema_makes_the_test_errored_with_the_problem(tmp_path):
    (tmp_path / "schema.eval.py").write_text(
        "from agent_health import test, expect\n\n"
        '@test("typo", prompt="Diagnose why the payment service is failing. Answer in JSON.")\n'
        "async def typo(agent):\n"
        "    result = await agent.run()\n"
        '    expect(result).to_match_schema({"type": "object", "properties": {"service": {"type": "strng"}}})\n'
    )
    loaded = load_tests([tmp_path / "schema.eval.py"])
    (result,) = run_tests(loaded.tests, define_config(root=str(tmp_path), state_dir="state"), "demo@v2")
    assert result.status == "errored"
    assert "invalid JSON schema at $.properties.service.type" in result.error and "strng" in result.error
