"""Bad eval input: every malformed data file or case is one error naming the file, the case and the
field, while every other file, and every valid case of the same file, still loads and runs."""

from __future__ import annotations

import json

import pytest

from agent_health import load_tests
from agent_health.model import RunReport
from tests.support.cli import cli_in_process

# The examples of wrong types, one case each.
MIXED = (
    "tests:\n"
    "  - {name: wrong labels, prompt: p, labels: 5}\n"
    '  - {name: wrong context, prompt: p, context: "x"}\n'
    '  - {name: wrong timeout, prompt: p, timeout: "soon"}\n'
    '  - {name: wrong epochs, prompt: p, epochs: "x"}\n'
)
GOOD_CASE = "  - name: good case\n    prompt: Diagnose why the payment service is failing.\n"

# (field, YAML value, words the error must contain besides the file, the case and the field)
WRONG_FIELDS = [
    ("labels", "5", "list"),
    ("labels", "[[a, b]]", "string"),
    ("tags", "7", "list"),
    ("context", '"x"', "object"),
    ("context", "5", "list"),
    ("context", "[[1, 2]]", "object"),
    ("context", "[{description: [a], value: x}]", "string"),
    ("timeout", '"soon"', "number"),
    ("timeout", "-5", "greater than 0"),
    ("timeout", "0", "greater than 0"),
    ("timeout", ".inf", "finite"),
    ("timeout", "true", "not a boolean"),
    ("timeout", "[30]", "number"),
    ("epochs", '"x"', "integer"),
    ("epochs", "0", "greater than or equal to 1"),
    ("epochs", "-2", "greater than or equal to 1"),
    ("epochs", "1.5", "integer"),
    ("epochs", "{n: 2}", "integer"),
    ("expected_tools", "5", "list"),
    ("expected_tools", "[[search_logs]]", "string"),
    ("expected_outcomes", "{a: 1}", "string"),
    ("expected_trajectory", "5", "list"),
    ("expected_trajectory", "[oops]", "object"),
    ("expected_trajectory", "[{required_tools: 5}]", "list"),
    ("expected_trajectory", "[{step: soon}]", "integer"),
    ("skip_judge", "maybe", "boolean"),
    ("name", "[a, b]", "string"),
    ("prompt", "{text: hi}", "string"),
    ("description", "[x]", "string"),
    ("category", "[RCA]", "string"),
    ("expected_tool", "[search_logs]", "unknown field"),
]


def errors_of(tmp_path) -> list[str]:
    return [str(e) for e in load_tests([tmp_path / "evals"]).errors]


@pytest.mark.parametrize(("field", "value", "words"), WRONG_FIELDS, ids=[f"{f}={v}" for f, v, _ in WRONG_FIELDS])
def test_a_wrong_field_is_one_error_naming_file_case_and_field(tmp_path, evals, field, value, words):
    prompt = "    prompt: hi\n" if field != "prompt" else ""  # a key twice would be an error of its own
    evals("bad.yaml", f"tests:\n  - id: broken case\n{prompt}    {field}: {value}\n" + GOOD_CASE)
    loaded = load_tests([tmp_path / "evals"])
    assert [t.case.name for t in loaded.tests] == ["good case"]  # the valid neighbour still loads
    [error] = [str(e) for e in loaded.errors]
    assert error.startswith("bad.yaml:2: case #1 'broken case': ")
    assert f"{field}" in error and words in error


EXPORTED_WRONG = [
    ("labels", 5, "list"),
    ("context", "x", "object"),
    ("expectedOutcomes", 5, "list"),
    ("expectedTrajectory", [{"requiredTools": {"a": 1}}], "string"),
    ("expectedTrajectory", "search the logs", "object"),
    ("timeout", "soon", "number"),
    ("epochs", "x", "integer"),
    ("initialPrompt", ["a"], "string"),
]


@pytest.mark.parametrize(("field", "value", "words"), EXPORTED_WRONG, ids=[f"{f}={v}" for f, v, _ in EXPORTED_WRONG])
def test_exported_format_wrong_field(tmp_path, evals, field, value, words):
    good = {"id": "tc-good", "name": "good", "initialPrompt": "Why are payments failing?", "createdAt": "2025-01-01"}
    bad = {"id": "tc-bad", "name": "bad", "initialPrompt": "Why?", field: value}
    evals("cases.json", json.dumps([bad, good]))
    loaded = load_tests([tmp_path / "evals"])
    assert [t.case.name for t in loaded.tests] == ["good"]  # unknown export fields (createdAt) are ignored
    [error] = [str(e) for e in loaded.errors]
    assert error.startswith("cases.json: case #1 'tc-bad': ") and field in error and words in error


STRUCTURE = [
    ("defaults-list.yaml", "defaults: [smoke]\ntests:\n" + GOOD_CASE, "defaults: expected an object"),
    (
        "defaults-field.yaml",
        "defaults: {timeout: -1}\ntests:\n" + GOOD_CASE,
        "defaults: timeout: Input should be greater",
    ),
    ("tests-scalar.yaml", "tests: 5\n", "'tests' must be a list of test cases"),
    ("scalar.yaml", "5\n", "no test cases found"),
    ("case-list.yaml", "tests:\n  - [1, 2]\n" + GOOD_CASE, "case #1: expected an object of case fields, got list"),
    (
        "case-string.yaml",
        "tests:\n  - just a string\n" + GOOD_CASE,
        "case #1: expected an object of case fields, got str",
    ),
    ("no-prompt.yaml", "tests:\n  - name: nothing\n" + GOOD_CASE, "has no prompt"),
    ("no-name.yaml", "tests:\n  - prompt: hi\n" + GOOD_CASE, "has no 'name' or 'id'"),
    ("dupe.yaml", "tests:\n" + GOOD_CASE + GOOD_CASE, "duplicate test name 'good case'"),
    ("bad-syntax.yaml", "tests: [\n", "invalid YAML"),
    ("bad.json", '[{"name": "a", "prompt": "b"},]', "invalid JSON"),
    ("control.yaml", "tests:\n  - name: a\x01b\n    prompt: hi\n", "invalid YAML"),
]


@pytest.mark.parametrize(("name", "content", "words"), STRUCTURE, ids=[s[0] for s in STRUCTURE])
def test_malformed_structure_is_named(tmp_path, evals, name, content, words):
    evals(name, content)
    evals("other.yaml", "tests:\n" + GOOD_CASE)
    loaded = load_tests([tmp_path / "evals"])
    assert "other::good-case" in [t.case.id for t in loaded.tests]  # another file always loads
    errors = [str(e) for e in loaded.errors]
    assert len(errors) == 1 and errors[0].startswith(name) and words in errors[0], errors


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_non_utf8_byte_names_file_and_line(tmp_path, evals, suffix):
    body = (
        b"tests:\n  - name: latin\n    prompt: caf\xe9\n"
        if suffix == ".yaml"
        else b'[\n{"name": "latin",\n "prompt": "caf\xe9"}]'
    )
    evals("latin" + suffix, body)
    [error] = errors_of(tmp_path)
    assert error.startswith(f"latin{suffix}:3: not UTF-8 text: byte 0xe9")


def test_jsonl_bad_lines_are_reported_by_line_and_the_good_lines_run(tmp_path, evals):
    evals(
        "rows.jsonl",
        b'{"name": "first", "prompt": "disk full on logs-ingest"}\n'
        b'{"name": "broken", "prompt": \n'
        b"\n"
        b'{"name": "latin", "prompt": "caf\xe9"}\n'
        b"[1, 2]\n"
        b'{"name": "typed", "prompt": "p", "epochs": "x"}\n'
        b'{"id": "last", "initialPrompt": "kafka consumer lag"}\n',
    )
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=report.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    report = RunReport.model_validate_json((tmp_path / "report.json").read_text())
    assert sorted(r.name for r in report.results) == ["first", "last"]
    assert all(r.status == "passed" for r in report.results)
    assert [e.split(": ", 1)[0] for e in report.load_errors] == [
        "rows.jsonl:2",
        "rows.jsonl:4",
        "rows.jsonl:5",
        "rows.jsonl:6",
    ]
    assert "invalid JSON" in report.load_errors[0] and "not UTF-8" in report.load_errors[1]
    assert "expected an object" in report.load_errors[2] and "epochs" in report.load_errors[3]
    assert "rows.jsonl:2" in proc.stdout + proc.stderr


def test_deep_nesting_is_an_error_not_a_recursion_crash(tmp_path, evals):
    evals("deep.json", "[" * 100_000 + "]" * 100_000)
    evals("deep.yaml", "tests:\n  - name: deep\n    prompt: hi\n    context: " + "[" * 2000 + "]" * 2000 + "\n")
    evals("deep-row.jsonl", '{"name": "ok", "prompt": "p"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    loaded = load_tests([tmp_path / "evals"])
    assert [t.case.name for t in loaded.tests] == ["ok"]
    messages = sorted(str(e) for e in loaded.errors)
    assert messages[0] == "deep-row.jsonl:2: invalid JSON: nested too deeply"
    assert messages[1] == "deep.json: invalid JSON: nested too deeply"
    assert messages[2].startswith("deep.yaml:4: invalid YAML: nested more than 100 levels deep")


def test_cli_runs_every_valid_case_and_exits_2(tmp_path, evals):
    """The issue's examples in one run: a process, not a traceback; exit 2; the rest runs."""
    evals(
        "mixed.yaml",
        MIXED + "  - {name: negative timeout, prompt: p, timeout: -5}\n"
        "  - {name: zero epochs, prompt: p, epochs: 0}\n" + GOOD_CASE,
    )
    evals("latin.json", b'[{"name": "x", "prompt": "caf\xe9"}]')
    evals("list-defaults.yaml", "defaults: [a]\ntests:\n" + GOOD_CASE)
    evals("fine.yaml", "tests:\n  - name: fine\n    prompt: checkout is slow, p99 latency above 4 seconds\n")
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=report.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    report = RunReport.model_validate_json((tmp_path / "report.json").read_text())
    assert sorted(r.test_id for r in report.results) == ["fine::fine", "mixed::good-case"]
    errors = report.load_errors
    assert len(errors) == 8
    for n, (name, field) in enumerate(
        [
            ("wrong labels", "labels"),
            ("wrong context", "context"),
            ("wrong timeout", "timeout"),
            ("wrong epochs", "epochs"),
            ("negative timeout", "timeout"),
            ("zero epochs", "epochs"),
        ],
        start=1,
    ):
        assert any(e.startswith(f"mixed.yaml:{n + 1}: case #{n} '{name}': {field}") for e in errors), (name, errors)
    assert any(e.startswith("latin.json:1: not UTF-8") for e in errors)
    assert any(e.startswith("list-defaults.yaml: defaults: expected an object") for e in errors)


def test_headless_dagster_job_keeps_going_past_malformed_cases(tmp_path, evals):
    from tests.faults.conftest import python

    evals("mixed.yaml", "tests:\n  - {name: wrong labels, prompt: p, labels: 5}\n" + GOOD_CASE)
    evals("latin.json", b'[{"name": "x", "prompt": "caf\xe9"}]')
    evals("fine.yaml", "tests:\n  - name: fine\n    prompt: checkout is slow, p99 latency above 4 seconds\n")
    proc = python(
        "import sys; from agent_health_dagster.headless import main; sys.exit(main())",
        cwd=tmp_path,
        env={"AGENT_HEALTH_EVAL_ROOT": str(tmp_path / "evals"), "DAGSTER_HOME": str(tmp_path / "home")},
        timeout=300,
    )
    # exit 1: the rollups of `latin` (no test loaded) have no gradable test, which their checks say
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "FAILED pass_rate_threshold on latin/rollup" in proc.stdout
    assert "mixed: evaluating 1 test(s) x 2 version(s)" in proc.stdout
    assert "fine: evaluating 1 test(s) x 2 version(s)" in proc.stdout
    assert "latin: no tests (skipped)" in proc.stdout
    assert "mixed.yaml:2: case #1 'wrong labels': labels" in proc.stderr
    assert "latin.json:1: not UTF-8" in proc.stderr


def test_docs_error_examples_are_real_messages(tmp_path, evals):
    """docs/eval-files.md shows these messages; they are what the loader says for these files."""
    from tests.faults.conftest import ROOT

    doc = (ROOT / "docs" / "eval-files.md").read_text()
    shown = doc.split("## Validation and errors", 1)[1].split("```", 2)[1].strip().splitlines()
    evals("mixed.yaml", MIXED)
    evals("rows.jsonl", b'{"name": "first", "prompt": "p"}\n{"name": "broken", "prompt": \n')
    evals("latin.json", b'[{"name": "x", "prompt": "caf\xe9"}]')
    errors = [str(e) for e in load_tests([tmp_path / "evals"]).errors]
    assert shown and all(line in errors for line in shown), (shown, errors)
