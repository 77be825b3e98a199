"""Eval files that differ only in their extension (`one.eval.py`, `one.yaml`) are one suite, in
the CLI and in Dagster alike: the code location registered the tests of one of them and dropped
the other's without a word (every check passed, exit 0) while `agent-health run` ran both."""

from __future__ import annotations

import json

from tests.faults.dagster_project import dagster_instance, evaluate, keys_of, pipeline_for, register
from tests.faults.lifecycle import budget, jsonl_results
from tests.support.cli import cli_in_process

CODE = """
from agent_health import expect, test

@test("code check", prompt="Why is checkout slow?")
async def code_check(agent):
    result = await agent.run()
    expect(result.output).to_be_truthy()
"""
DATA = "tests:\n  - name: data check\n    prompt: Diagnose why the payment service is failing.\n"


def test_every_file_of_a_suite_is_registered_and_run_as_the_cli_runs_it(tmp_path, evals):
    evals("one.eval.py", CODE)
    evals("one.yaml", DATA)
    evals("one.json", json.dumps([{"name": "json check", "prompt": "Why is checkout slow?"}]))
    p = cli_in_process("run", "evals", "--no-judge", "--reporter", "jsonl=r.jsonl", cwd=tmp_path, timeout=budget(30))
    assert p.returncode in (0, 1), p.stdout + p.stderr
    ran = {r["test_id"] for r in jsonl_results(tmp_path / "r.jsonl").values()}
    assert ran == {"one::code-check", "one::data-check", "one::json-check"}
    pipeline = pipeline_for(tmp_path)
    assert [s.suite for s in pipeline.suites] == ["one"]
    with dagster_instance(tmp_path) as instance:
        assert register(instance, pipeline) == []
        keys = keys_of(instance, pipeline, "one")
        assert {f"one::{k}" for k in keys} == ran  # Dagster has the tests the CLI runs
        found = evaluate(instance, pipeline, "one", ["demo@v2"])
    assert sorted(found) == sorted(f"demo@v2|{k}" for k in keys)
    assert all(meta["status"] in ("passed", "failed") for meta in found.values())


def test_a_broken_second_file_keeps_its_partitions_and_is_named(tmp_path, evals):
    evals("one.eval.py", CODE)
    evals("one.yaml", DATA)
    pipeline = pipeline_for(tmp_path)
    with dagster_instance(tmp_path) as instance:
        assert register(instance, pipeline) == []
        assert keys_of(instance, pipeline, "one") == ["code-check", "data-check"]
        evals("one.yaml", DATA + "  - name: [broken\n")
        problems = register(instance, pipeline)
        assert any("one.yaml:5: invalid YAML" in p for p in problems), problems
        assert keys_of(instance, pipeline, "one") == ["code-check", "data-check"]  # a typo wipes nothing


def test_one_test_id_in_two_files_of_a_suite_runs_nowhere_and_is_named(tmp_path, evals):
    evals("one.eval.py", CODE.replace("code check", "check"))
    evals("one.yaml", DATA.replace("data check", "check") + "  - name: data only\n    prompt: p\n")
    p = cli_in_process("run", "evals", "--no-judge", "--reporter", "jsonl=r.jsonl", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 2, p.stdout + p.stderr
    ran = {r["test_id"] for r in jsonl_results(tmp_path / "r.jsonl").values()}
    assert ran == {"one::data-only"}
    pipeline = pipeline_for(tmp_path)
    with dagster_instance(tmp_path) as instance:
        problems = register(instance, pipeline)
        assert keys_of(instance, pipeline, "one") == ["data-only"]  # what the CLI runs, no more
    named = "test id 'one::check' is defined in 2 files (one.eval.py:3, one.yaml:2)"
    assert any(named in p for p in problems), problems
