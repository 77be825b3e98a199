"""The loader: per-file registries, ids, content hashes, data formats, clear file errors."""

from __future__ import annotations

import json

import pytest

from agent_health import load_tests
from agent_health.loader import slug
from tests.core.helpers import run_dir

CODE = """
from agent_health import test, describe, expect

@test("alpha", prompt="p", labels=["a"])
async def alpha(agent):
    pass

with describe("Group One"):
    with describe("inner"):
        @test("Beta test!")
        def beta():
            expect(1).to_equal(1)
"""


def test_ids_are_stable_and_partition_key_safe(write_eval, tmp_path):
    write_eval("sub/demo.eval.py", CODE)
    loaded = load_tests([tmp_path / "evals"])
    ids = [t.case.id for t in loaded.tests]
    assert ids == ["sub/demo::alpha", "sub/demo::group-one/inner/beta-test"]
    assert [t.case.name for t in loaded.tests] == ["alpha", "Group One > inner > Beta test!"]
    for i in ids:
        assert "|" not in i and "..." not in i and "," not in i
    # the same test has the same id when loaded through its file with the same root
    again = load_tests([tmp_path / "evals" / "sub" / "demo.eval.py"], root=tmp_path / "evals")
    assert [t.case.id for t in again.tests] == ids


def test_loading_twice_never_duplicates(write_eval, tmp_path):
    a = write_eval("a.eval.py", CODE)
    write_eval("b.eval.py", CODE)
    first = load_tests([tmp_path / "evals"])
    second = load_tests([a, a, tmp_path / "evals"])
    assert len(first.tests) == 4 and len(second.tests) == 4
    assert {t.case.suite for t in first.tests} == {"a", "b"}
    assert all(t.registry.path in ("a.eval.py", "b.eval.py") for t in first.tests)


def test_content_hash_changes_only_with_the_definition(write_eval, tmp_path):
    path = write_eval("h.eval.py", CODE)
    h1 = {t.case.id: t.case.content_hash for t in load_tests([path]).tests}
    assert h1 == {t.case.id: t.case.content_hash for t in load_tests([path]).tests}
    path.write_text(CODE.replace("expect(1).to_equal(1)", "expect(2).to_equal(2)"))
    h2 = {t.case.id: t.case.content_hash for t in load_tests([path]).tests}
    assert h2["h::alpha"] == h1["h::alpha"]
    assert h2["h::group-one/inner/beta-test"] != h1["h::group-one/inner/beta-test"]
    path.write_text(CODE.replace('labels=["a"]', 'labels=["b"]'))
    h3 = {t.case.id: t.case.content_hash for t in load_tests([path]).tests}
    assert h3["h::alpha"] != h1["h::alpha"]


def test_broken_files_are_reported_with_line_and_others_load(write_eval, tmp_path):
    write_eval("good.eval.py", CODE)
    write_eval("syntax.eval.py", "from agent_health import test\n\n@test('x')\ndef x(:\n    pass\n")
    write_eval("raises.eval.py", "import os\n\nraise RuntimeError('cannot connect to seed db')\n")
    write_eval("bad.json", '{"tests": [\n  {"name": "a", "prompt": "p"},\n  oops\n]}')
    write_eval(
        "dupe.eval.py",
        """
        from agent_health import test

        @test("same")
        def a(): pass

        @test("same")
        def b(): pass
    """,
    )
    write_eval(
        "fixture.eval.py",
        """
        from agent_health import test

        @test("needs db")
        def a(database): pass
    """,
    )
    loaded = load_tests([tmp_path / "evals"])
    errors = sorted(str(e) for e in loaded.errors)
    assert len(loaded.tests) == 3  # good.eval.py (2) + the first "same"
    assert any(e.startswith("syntax.eval.py:4:") and "SyntaxError" in e for e in errors)
    assert any(e.startswith("raises.eval.py:3:") and "cannot connect to seed db" in e for e in errors)
    assert any(e.startswith("bad.json:3:") and "invalid JSON" in e for e in errors)
    assert any(e.startswith("dupe.eval.py:6:") and "duplicate test name 'same'" in e and "line 3" in e for e in errors)
    assert any(e.startswith("fixture.eval.py:3:") and "'needs db'" in e and "'database'" in e for e in errors)


def test_agent_health_export_format_loads_and_runs(write_eval, tmp_path):
    cases = [
        {
            "id": "tc-1",
            "name": "Payments outage",
            "description": "d",
            "category": "RCA",
            "difficulty": "Hard",
            "tags": ["payments"],
            "initialPrompt": "Why are card payments failing?",
            "context": [{"description": "Error log", "value": "Connection refused to db-primary:5432"}],
            "expectedOutcomes": ["identifies that payment-service cannot reach its database"],
            "expectedTrajectory": [
                {"step": 1, "description": "logs", "requiredTools": ["search_logs"]},
                {"step": 2, "description": "traces", "requiredTools": ["query_traces"]},
            ],
        }
    ]
    write_eval("exported.json", json.dumps({"testCases": cases}))
    loaded = load_tests([tmp_path / "evals"])
    case = loaded.tests[0].case
    assert case.kind == "data" and case.prompt == "Why are card payments failing?"
    assert case.labels == ("payments", "category:RCA", "difficulty:Hard")
    assert case.context[0].value.startswith("Connection refused")
    assert case.expected_trajectory[1].required_tools == ("query_traces",)
    v1 = run_dir(tmp_path / "evals", agent="demo@v1")["Payments outage"]
    v2 = run_dir(tmp_path / "evals", agent="demo@v2")["Payments outage"]
    # v1 never queries traces: the required-tool check fails; v2 passes both checks and the judge
    assert v1.status == "failed" and "query_traces" in v1.error
    assert v2.status == "passed", v2.error
    assert [s.kind for s in v2.signals if s.kind != "metric"] == ["deterministic", "deterministic", "judge"]
    assert v2.run.context[0]["value"].startswith("Connection refused")


def test_native_yaml_and_jsonl(write_eval, tmp_path):
    write_eval(
        "native.yaml",
        """
        defaults:
          labels: [smoke]
        tests:
          - name: oom
            prompt: image-resizer OOMKilled
            expected_tools: [search_logs]
            expected_outcomes: [memory leak]
    """,
    )
    write_eval(
        "rows.jsonl",
        '{"name": "r1", "prompt": "disk full on logs-ingest"}\n\n{"id": "r2", "initialPrompt": "kafka consumer lag"}\n',
    )
    write_eval("empty.yaml", "tests:\n  - name: no prompt here\n")
    loaded = load_tests([tmp_path / "evals"])
    ids = sorted(t.case.id for t in loaded.tests)
    assert ids == ["native::oom", "rows::r1", "rows::r2"]
    assert [str(e) for e in loaded.errors] == [
        "empty.yaml:2: case #1 'no prompt here': has no prompt ('prompt' or 'initialPrompt')"
    ]
    assert loaded.tests[0].case.labels == ("smoke",)


def test_a_loaded_data_case_is_what_validating_its_fields_gives(write_eval, tmp_path):
    """Data cases are built from their already validated fields without a second validation
    (agent_health.model.case.loaded_case): every field must still have its TestCase type (a
    YAML `timeout: 60` a float, lists tuples), so the case equals its validated copy."""
    from agent_health.model import TestCase

    write_eval(
        "typed.yaml",
        """
        defaults: {labels: [smoke], timeout: 60, epochs: 2}
        tests:
          - name: typed
            prompt: p
            tags: p1
            category: RCA
            context: {description: d, value: {"a": 1}}
            expected_trajectory: [{step: 1, description: s, requiredTools: [a, b]}]
            expected_tools: c
            expected_outcomes: x
            skip_judge: true
            max_cost_usd: 1
          - {name: bare, prompt: q}
    """,
    )
    write_eval("rows.json", '[{"id": "tc-1", "initialPrompt": "r", "expectedOutcomes": ["o"]}]')
    loaded = load_tests([tmp_path / "evals"])
    assert len(loaded.tests) == 3 and not loaded.errors
    for t in loaded.tests:
        validated = TestCase.model_validate(t.case.model_dump())
        assert t.case == validated and t.case.model_fields_set == validated.model_fields_set
        for name in TestCase.model_fields:  # the same types too: 60.0, not 60; tuples, not lists
            assert type(getattr(t.case, name)) is type(getattr(validated, name)), (t.case.name, name)


def test_a_json_list_is_read_case_by_case_and_still_fails_whole(write_eval, tmp_path):
    """A JSON list of cases is parsed one case at a time (its parsed document never lives whole
    beside the tests), yet a file that is not valid JSON still loads nothing, with json's error."""
    cases = [{"name": f"c{i}", "prompt": "p"} for i in range(3)]
    write_eval("good.json", " \n" + json.dumps(cases, indent=1) + "\n")
    write_eval("broken.json", json.dumps(cases)[:-1] + ", {}, ]")  # two cases read before the error
    write_eval("after.json", json.dumps(cases) + " []")
    loaded = load_tests([tmp_path / "evals"])
    assert sorted(t.case.id for t in loaded.tests) == ["good::c0", "good::c1", "good::c2"]
    assert sorted(str(e) for e in loaded.errors) == [
        "after.json:1: invalid JSON: Extra data (column 95)",
        "broken.json:1: invalid JSON: Expecting value (column 99)",
    ]


def test_a_json_list_is_read_a_piece_at_a_time_with_values_across_the_pieces(write_eval, tmp_path, monkeypatch):
    """The file's text is read and parsed a piece at a time (its whole text never lives beside
    the tests either): a value cut by a piece's end (a number, a text, a long case, a byte-order
    mark, a character of several bytes) loads as read whole, and an error past the first piece
    still loads nothing, naming the error json names."""
    from agent_health.loader import data

    monkeypatch.setattr(data, "_PIECE", 7)  # every value crosses a piece
    reads: list[int] = []
    opened = data.Path.open

    def counting_open(self, *args, **kwargs):  # the sizes the loader reads pieces.json in
        fh = opened(self, *args, **kwargs)
        if self.name == "pieces.json":
            read = fh.read
            fh.read = lambda size=-1: reads.append(size) or read(size)
        return fh

    monkeypatch.setattr(data.Path, "open", counting_open)
    cases = [
        {"name": "c0", "prompt": "pé ✓ " * 3 + "end", "timeout": 12345},
        {"name": "c1", "prompt": "p", "epochs": 2, "timeout": 1.5e1},
        {"name": "long", "prompt": "x" * 300, "expected_outcomes": ["o" * 50]},
    ]
    text = "\ufeff[ " + ",\n ".join(json.dumps(c, ensure_ascii=False) for c in cases) + " ]  \n"
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "pieces.json").write_text(text, encoding="utf-8")
    write_eval("late.json", json.dumps(cases)[:-1] + ", {}}]")  # invalid past the first pieces
    loaded = load_tests([tmp_path / "evals"])
    by_name = {t.case.name: t.case for t in loaded.tests}
    assert sorted(by_name) == ["c0", "c1", "long"]
    assert by_name["c0"].prompt == "pé ✓ " * 3 + "end" and by_name["c0"].timeout_s == 12345.0
    assert by_name["c1"].epochs == 2 and by_name["c1"].timeout_s == 15.0
    assert by_name["long"].prompt == "x" * 300
    assert len(reads) > 5 and min(reads) == 7 and -1 not in reads  # read in pieces, never whole
    assert sum(reads) < 4 * len(text.encode())  # a value longer than a piece: read in ever larger pieces
    late = json.dumps(cases)[:-1] + ", {}}]"
    with pytest.raises(json.JSONDecodeError) as whole:
        json.loads(late)
    assert [str(e) for e in loaded.errors] == [
        f"late.json:1: invalid JSON: {whole.value.msg} (column {whole.value.colno})"
    ]


def test_a_data_case_keeps_what_differs_and_makes_its_test_case_when_read(write_eval, tmp_path):
    """A loaded data case keeps its own id, name, line, hash and prompt, and one tuple of the rest
    of its fields for the cases of its file that share them; its TestCase is made on each read,
    equal every time, and duplicate names are still found, in case order among the other errors."""
    from agent_health.loader.types import LoadedDataTest, LoadedTest

    cases = [
        {"name": "a", "prompt": "p", "labels": ["x"]},
        {"name": "no prompt"},
        {"name": "b", "prompt": "q", "labels": ["x"]},
        {"name": "A", "prompt": "p2"},  # the same id as "a"
        {"name": "c", "prompt": "p", "labels": ["y"]},
        {"name": "b", "prompt": "again"},
    ]
    write_eval("many.json", json.dumps(cases))
    loaded = load_tests([tmp_path / "evals"])
    assert [t.id for t in loaded.tests] == ["many::a", "many::b", "many::c"]
    assert [str(e) for e in loaded.errors] == [
        "many.json: case #2 'no prompt': has no prompt ('prompt' or 'initialPrompt')",
        "many.json: duplicate test name 'A' (case #4)",
        "many.json: duplicate test name 'b' (case #6)",
    ]
    a, b, c = loaded.tests
    assert isinstance(a, LoadedDataTest)
    assert a.case is not a.case and a.case == a.case and a.case.prompt == "p" and a.case.labels == ("x",)
    assert a._rest is b._rest and a._rest is not c._rest  # the fields they share: one tuple
    assert a.epochs is None and a.case.model_fields_set == set(type(a.case).model_fields)
    # a test with another case is a LoadedTest of its own (as re-judging makes one)
    other = LoadedTest(a.case.model_copy(update={"epochs": 3}), a.registry, a.body, a.run)
    assert other.case.epochs == 3 and other.epochs == 3 and other.id == a.id


def test_the_values_data_cases_repeat_are_held_once(write_eval, tmp_path):
    """Each text and tuple the cases of a file repeat (prompt, labels, description, context,
    turns, outcomes, the steps) is one object for all of them, whatever else differs."""
    same = {
        "prompt": "Diagnose it.",
        "labels": ["rca", "payments"],
        "description": "the payment service fails",
        "context": [{"description": "logs", "value": "db-primary refused"}],
        "turns": ["And now?", "Thanks."],
        "expected_outcomes": ["names db-primary"],
        "expected_tools": ["lookup"],
    }
    cases = [{"name": f"case {i}", **same, "epochs": i + 1} for i in range(3)]
    write_eval("repeat.json", json.dumps(cases))
    loaded = load_tests([tmp_path / "evals"])
    assert not loaded.errors
    first, *rest = (t.case for t in loaded.tests)
    fields = ("prompt", "labels", "description", "context", "turns", "expected_outcomes", "expected_trajectory")
    for case in rest:
        assert case.name != first.name and case.epochs != first.epochs
        for field in fields:
            assert getattr(case, field) is getattr(first, field) and getattr(first, field), field


def test_missing_path_is_an_error():
    loaded = load_tests(["/nonexistent/evals"])
    assert not loaded.tests and "no such file or directory" in str(loaded.errors[0])


def test_slug():
    assert slug("Checkout > Happy path!") == "checkout/happy-path"
    assert slug("A  B") == "a-b"
