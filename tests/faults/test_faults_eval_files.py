"""Eval files that used to pass, crash late or lose data: a generator body (it never ran), a 20 MB
assertion message (stored four times), a 10 kB test name (failed only when stored), duplicate
JSON keys (the last one silently won), a byte-order mark (broke JSON but not YAML or Python), a
5,000-digit number (dropped the file without a line), and one test id defined by three files of
one suite (all three ran; one result remained). Each is now a clear load error naming the file
(and the line, the test, the key or the other files), or is accepted the same way everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_health import load_tests
from agent_health.model.limits import NAME_MAX, STORED_TEXT_MAX
from agent_health.stores import LocalResultStore
from tests.support.cli import cli_in_process

PROMPT = "Diagnose why the payment service is failing."


def loaded(tmp_path: Path) -> tuple[list[str], list[str]]:
    result = load_tests([tmp_path / "evals"])
    return sorted(t.case.id for t in result.tests), [str(e) for e in result.errors]


@pytest.mark.parametrize(
    "body",
    [
        "def gen(agent):\n    yield\n    raise AssertionError('never reached')",
        "async def gen(agent):\n    yield\n    raise AssertionError('never reached')",
    ],
)
def test_a_generator_body_is_a_load_error_not_a_pass(tmp_path, evals, body):
    evals(
        "gen.eval.py",
        f"""
from agent_health import test


@test("generator body", prompt="{PROMPT}")
{body}


@test("plain body", prompt="{PROMPT}")
async def plain(agent):
    await agent.run()
""",
    )
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=report.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "gen.eval.py:4: test 'generator body': the body is a generator" in proc.stdout, proc.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["name"] for r in report["results"]] == ["plain body"]  # the other test still ran


def test_a_huge_assertion_message_is_stored_cut_not_copied(tmp_path, evals):
    """A 20 MB assertion message became an 80 MB result file (message, signal, insight twice)."""
    evals(
        "huge.eval.py",
        """
        from agent_health import test


        @test("huge message")
        async def huge():
            assert False, "payment " * 2_500_000
        """,
    )
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=report.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [stored] = list((tmp_path / ".agent_health" / "results" / "_runs").rglob("results.jsonl"))
    assert stored.stat().st_size < 6 * STORED_TEXT_MAX  # every copy bounded, the whole stored result too
    [result] = json.loads((tmp_path / "report.json").read_text())["results"]
    assert result["status"] == "failed"
    whole = len("huge.eval.py:6: ") + 20_000_000  # the message, where it was raised
    assert len(result["error"]) <= STORED_TEXT_MAX and result["error"].endswith(f"[cut: {whole:,} characters in all]")
    assert result["error"].startswith("assert: huge.eval.py:6: payment payment")


@pytest.mark.parametrize("kind", ["code", "data"])
def test_a_huge_test_name_is_a_short_load_error(tmp_path, evals, kind):
    """A 10 kB name failed only at storing, with a 10 kB message."""
    name = ("checkout " * 1200).strip()
    if kind == "code":
        evals("names.eval.py", f"from agent_health import test\n\n\n@test({name!r})\nasync def t():\n    pass\n")
        evals("ok.eval.py", "from agent_health import test\n\n\n@test('fine')\nasync def t():\n    pass\n")
    else:
        evals("names.json", json.dumps([{"name": name, "prompt": PROMPT}, {"name": "fine", "prompt": PROMPT}]))
    ids, errors = loaded(tmp_path)
    assert ids == ["names::fine"] if kind == "data" else ["ok::fine"]
    [error] = errors
    assert f"the test name has {len(name):,} characters, above the limit of {NAME_MAX}" in error
    assert error.startswith("names.") and len(error) < 300, error


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        (
            "dup.json",
            '[{"name": "a", "prompt": "x"},\n {"name": "b",\n  "prompt": "x", "timeout": 5, "timeout": 50}]',
            3,
        ),
        ("dup.jsonl", '{"name": "a", "prompt": "x"}\n{"name": "b", "prompt": "x", "name": "c"}\n', 2),
        ("nested.json", '{"tests": [{"name": "a", "prompt": "x", "context": [{"value": "{", "value": 1}]}]}', 1),
    ],
)
def test_duplicate_json_keys_are_an_error_naming_the_key_and_line(tmp_path, evals, name, content, line):
    evals(name, content)
    evals("other.json", json.dumps([{"name": "other", "prompt": PROMPT}]))
    ids, errors = loaded(tmp_path)
    assert "other::other" in ids
    key = {"dup.json": "timeout", "dup.jsonl": "name", "nested.json": "value"}[name]
    assert f"{name}:{line}: duplicate key {key!r} in one object" in "\n".join(errors), errors


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bom.json", json.dumps([{"name": "with bom", "prompt": PROMPT}])),
        ("bom.jsonl", json.dumps({"name": "with bom", "prompt": PROMPT}) + "\n"),
        ("bom.yaml", f"tests:\n  - name: with bom\n    prompt: {PROMPT}\n"),
        (
            "bom.eval.py",
            f"from agent_health import test\n\n\n@test('with bom', prompt={PROMPT!r})\nasync def t():\n    pass\n",
        ),
    ],
)
def test_a_byte_order_mark_is_accepted_in_every_format(tmp_path, evals, name, content):
    evals(name, b"\xef\xbb\xbf" + content.encode())
    ids, errors = loaded(tmp_path)
    assert (ids, errors) == (["bom::with-bom"], [])


@pytest.mark.parametrize(
    ("name", "template", "line"),
    [
        ("long.json", '[{"name": "a", "prompt": "x"},\n {"name": "b", "prompt": "x", "epochs": DIGITS}]', 2),
        ("long.yaml", "tests:\n  - name: a\n    prompt: x\n    epochs: DIGITS\n", 4),
        ("long.jsonl", '{"name": "a", "prompt": "x"}\n{"name": "b", "prompt": "x", "epochs": DIGITS}\n', 2),
    ],
)
def test_a_five_thousand_digit_number_is_an_error_with_its_line(tmp_path, evals, name, template, line):
    evals(name, template.replace("DIGITS", "9" * 5000))
    evals("other.json", json.dumps([{"name": "other", "prompt": PROMPT}]))
    ids, errors = loaded(tmp_path)
    assert "other::other" in ids
    expected = (
        f"{name}:{line}: invalid {'YAML' if name.endswith('yaml') else 'JSON'}: a number with more than 4,300 digits"
    )
    assert any(e.startswith(expected) for e in errors), errors
    if name == "long.jsonl":
        assert "long::a" in ids  # the other lines still load


def test_one_test_id_in_several_files_is_a_load_error_naming_every_file(tmp_path, evals):
    evals("smoke.json", json.dumps([{"name": "good one", "prompt": PROMPT}, {"name": "json only", "prompt": PROMPT}]))
    evals("smoke.yaml", f"tests:\n  - name: good one\n    prompt: {PROMPT}\n")
    evals(
        "smoke.eval.py",
        f"from agent_health import test\n\n\n@test('good one', prompt={PROMPT!r})\nasync def t(agent):\n"
        "    await agent.run()\n",
    )
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=report.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        "smoke.eval.py:4: test id 'smoke::good-one' is defined in 3 files (smoke.eval.py:4, smoke.json, smoke.yaml:2)"
        in proc.stdout
    ), proc.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["test_id"] for r in report["results"]] == ["smoke::json-only"]  # no file's result replaced another's
    stored = LocalResultStore(tmp_path / ".agent_health" / "results").list()
    assert [k.test_id for k in stored] == ["smoke::json-only"]
