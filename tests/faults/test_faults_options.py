"""A single string where a list is expected is a one-element list (never split into characters),
in data files and in `@test(...)`; timeouts and epochs <= 0, and concurrency or a timeout <= 0 in
the configuration, are rejected naming the setting."""

from __future__ import annotations

import json

import pytest

from agent_health import load_tests
from agent_health.model import RunReport
from tests.support.cli import cli_in_process

PROMPT = "Diagnose why the payment service is failing."


def only_case(tmp_path):
    loaded = load_tests([tmp_path / "evals"])
    assert not loaded.errors, [str(e) for e in loaded.errors]
    [test] = loaded.tests
    return test.case


@pytest.mark.parametrize(
    ("yaml_field", "check"),
    [
        ("labels: abc", lambda c: c.labels == ("abc",)),
        ("tags: p1", lambda c: c.labels == ("p1",)),
        ("expected_tools: search_logs", lambda c: c.expected_trajectory[-1].required_tools == ("search_logs",)),
        ("expectedTools: search_logs", lambda c: c.expected_trajectory[-1].required_tools == ("search_logs",)),
        ("expected_outcomes: names the database", lambda c: c.expected_outcomes == ("names the database",)),
        ("expectedOutcomes: names the database", lambda c: c.expected_outcomes == ("names the database",)),
        ("context: {description: log, value: refused}", lambda c: [(x.description, x.value) for x in c.context]
         == [("log", "refused")]),
        ("expected_trajectory: {description: search, requiredTools: search_logs}",
         lambda c: c.expected_trajectory[0].required_tools == ("search_logs",)),
        ("expected_trajectory: [{required_tools: get_metrics}]",
         lambda c: c.expected_trajectory[0].required_tools == ("get_metrics",)),
    ],
)  # fmt: skip
def test_data_file_single_string_is_one_item(tmp_path, evals, yaml_field, check):
    evals("one.yaml", f"tests:\n  - name: t\n    prompt: {PROMPT}\n    {yaml_field}\n")
    assert check(only_case(tmp_path))


def test_defaults_single_string_is_one_item(tmp_path, evals):
    evals("d.yaml", f"defaults: {{labels: nightly}}\ntests:\n  - name: t\n    prompt: {PROMPT}\n")
    assert only_case(tmp_path).labels == ("nightly",)


def test_single_required_tool_is_checked_by_its_whole_name(tmp_path, evals):
    """`expected_tools: search_logs` used to check tools named 's', 'e', 'a', ..."""
    evals(
        "tools.yaml",
        f"tests:\n  - name: called\n    prompt: {PROMPT}\n    expected_tools: search_logs\n"
        f"  - name: not called\n    prompt: {PROMPT}\n    expected_tools: restart_service\n",
    )
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=r.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    results = {r.name: r for r in RunReport.model_validate_json((tmp_path / "r.json").read_text()).results}
    assert results["called"].status == "passed"
    assert [s.name for s in results["called"].signals if s.kind == "deterministic"] == [
        "to_have_called_tool('search_logs')"
    ]
    assert results["not called"].status == "failed" and "restart_service" in results["not called"].error


CODE = """
from agent_health import test


@test("labels", labels="abc", expected_outcomes="names the database", prompt="p")
def labels():
    pass


@test("context", context="Connection refused to db-primary", prompt="p")
def context():
    pass


@test("trajectory", expected_trajectory={"description": "search", "requiredTools": "search_logs"}, prompt="p")
def trajectory():
    pass
"""


def test_test_decorator_single_string_is_one_item(tmp_path, evals):
    evals("one.eval.py", CODE)
    loaded = load_tests([tmp_path / "evals"])
    assert not loaded.errors
    cases = {t.case.name: t.case for t in loaded.tests}
    assert cases["labels"].labels == ("abc",) and cases["labels"].expected_outcomes == ("names the database",)
    assert [c.value for c in cases["context"].context] == ["Connection refused to db-primary"]
    assert cases["trajectory"].expected_trajectory[0].required_tools == ("search_logs",)


BAD_OPTIONS = [
    ("timeout=-5", "timeout", "greater than 0"),
    ("timeout=0", "timeout", "greater than 0"),
    ("timeout='soon'", "timeout", "number"),
    ("timeout=float('nan')", "timeout", "finite number"),
    ("epochs=0", "epochs", "greater than or equal to 1"),
    ("epochs=-3", "epochs", "greater than or equal to 1"),
    ("epochs=2.5", "epochs", "integer"),
    ("epochs=True", "epochs", "not a boolean"),
    ("labels=5", "labels", "list"),
    ("labels=[1.5, None]", "labels[1]", "string"),
    ("expected_outcomes=7", "expected_outcomes", "list"),
    ("skip_judge='maybe'", "skip_judge", "boolean"),
]


@pytest.mark.parametrize(("option", "field", "words"), BAD_OPTIONS, ids=[o for o, _, _ in BAD_OPTIONS])
def test_test_decorator_bad_option_is_a_load_error_of_that_test(tmp_path, evals, option, field, words):
    evals(
        "opts.eval.py",
        f'from agent_health import test\n\n\n@test("bad", {option})\ndef bad():\n    pass\n\n\n'
        '@test("good", timeout=5, epochs=2)\ndef good():\n    pass\n',
    )
    loaded = load_tests([tmp_path / "evals"])
    assert [t.case.name for t in loaded.tests] == ["good"]
    [error] = [str(e) for e in loaded.errors]
    assert error.startswith("opts.eval.py:4: test 'bad': ") and f"{field}:" in error and words in error


CONFIG_FAULTS = [
    ("concurrency=0", "concurrency", "greater than or equal to 1"),
    ("concurrency=-4", "concurrency", "greater than or equal to 1"),
    ("timeout_s=0", "timeout_s", "greater than 0"),
    ("timeout_s=-5", "timeout_s", "greater than 0"),
    ("timeout_s=float('inf')", "timeout_s", "finite"),
    ("concurrency='lots'", "concurrency", "integer"),
    ("judge={'concurrency': 0}", "judge.concurrency", "greater than or equal to 1"),
    ("traces={'wait_s': -1}", "traces.wait_s", "greater than or equal to 0"),
]


@pytest.mark.parametrize(("setting", "field", "words"), CONFIG_FAULTS, ids=[c for c, _, _ in CONFIG_FAULTS])
def test_configuration_rejects_bad_numbers_naming_the_setting(tmp_path, evals, setting, field, words):
    evals("ok.yaml", f"tests:\n  - name: t\n    prompt: {PROMPT}\n")
    (tmp_path / "agent_health_config.py").write_text(
        f"from agent_health import define_config\n\nconfig = define_config({setting})\n"
    )
    proc = cli_in_process("run", "evals", "--no-judge", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert f"invalid configuration: {field}: " in line and words in line, line
    assert "Traceback" not in proc.stderr


def test_secret_in_a_rejected_setting_is_not_echoed(tmp_path):
    """pydantic's own message repeats the input; the configuration error must not."""
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\n\n"
        "config = define_config(judge={'provider': 'openai', 'model': 'm',\n"
        "                              'settings': {'api_key': 'sk-live-0123456789'}})\n"
    )
    proc = cli_in_process("agents", cwd=tmp_path)
    assert proc.returncode == 2 and "api_key" in proc.stderr
    assert "sk-live-0123456789" not in proc.stdout + proc.stderr


def test_report_json_is_valid_when_options_are_rejected(tmp_path, evals):
    evals("opts.eval.py", 'from agent_health import test\n\n\n@test("bad", timeout=-5)\ndef bad():\n    pass\n')
    evals("ok.yaml", f"tests:\n  - name: t\n    prompt: {PROMPT}\n")
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=r.json", cwd=tmp_path)
    assert proc.returncode == 2
    report = json.loads((tmp_path / "r.json").read_text())
    assert [r["test_id"] for r in report["results"]] == ["ok::t"]
    assert report["load_errors"] == ["opts.eval.py:4: test 'bad': timeout: Input should be greater than 0 (got -5)"]
