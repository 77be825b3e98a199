"""Every example in README.md and docs/ is exercised by a test. The examples no other test file
runs are run here; `test_every_block_is_exercised` fails when a new block appears that no test
claims (add it to EXERCISED with the test that runs it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_health import define_config, load_tests, run_tests
from agent_health.model import RunSettings
from agent_health.stores import LocalResultStore
from tests.conftest import ROOT
from tests.support import skip_or_fail

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)

# (file, first line of the block) -> the test that runs it. Blocks without a language are output
# or synopsis text (a usage line, a layout tree, a message a user sees), named as such.
EXERCISED = {
    ("README.md", "bash scripts/main.sh"): "tests/core/test_readme_commands.py (as written, fresh instance)",
    ("setup.md", "DAGSTER_HOME=$PWD/.agent_health/dagster_home"): "tests/core/test_readme_commands.py (as written)",
    ("dagster.md", "# every suite, both demo versions"): "tests/core/test_readme_commands.py (as written)",
    ("writing-evals.md", "# evals/payments.eval.py"): "test_the_writing_evals_example_runs_with_its_command",
    ("writing-evals.md", ". .venv/bin/activate"): "test_the_writing_evals_example_runs_with_its_command",
    **{
        ("README.md", head): "tests/core/test_readme_quickstart.py (from a fresh copy of the project)"
        for head in (
            "# evals/first.eval.py",
            ". .venv/bin/activate",
            "# my-agent/agent_health_config.py",
            "# my-agent/evals/hello.eval.py",
            "cd my-agent",
        )
    },
    ("cli.md", "agent-health [--config FILE] run"): "synopsis (tests/cli/test_cli.py runs every option)",
    ("dagster.md", "# my_project/definitions.py"): "tests/dagster/test_embedding.py (run as written)",
    ("dagster.md", "# my_project/defs/support_evals/defs.yaml"): "tests/dagster/test_embedding.py (dg loader)",
    (
        "cli.md",
        "agent-health run evals --agent demo@v1",
    ): "tests/reports/test_docs.py::test_the_cli_reports_section_runs",
    ("configuration.md", "from agent_health import define_config"): "tests/deploy/test_docs_config.py",
    ("layout.md", "agent_health/          the library"): "layout tree (tests/core/test_layers.py checks its order)",
    ("deploy.md", "# agent_health_config.py: results, judge cache"): "tests/deploy/test_docs_config.py",
    ("deploy.md", "# agent_health_config.py: the same on OpenSearch"): "tests/deploy/test_docs_config.py",
    ("deploy.md", "storage:"): "tests/deploy/test_docs_config.py (the tested PostgreSQL template)",
    ("deploy.md", "run_launcher:"): "tests/deploy/test_docs_config.py (real launcher config keys)",
    ("deploy.md", "run_monitoring:"): "tests/deploy/test_docs_config.py (the tested PostgreSQL template)",
    ("deploy.md", "# 1. the instance's role and database"): "tests/deploy/test_celery_route.py",
    ("deploy.md", "# 2. the result store's bucket"): "tests/deploy/test_celery_route.py",
    ("deploy.md", "# 3. the broker answers"): "tests/deploy/test_celery_route.py",
    ("deploy.md", "# 4. the daemon"): "tests/deploy/test_celery_route.py (the live route)",
    ("deploy.md", "# 5. a Celery worker"): "tests/deploy/test_celery_route.py (the live route)",
    ("eval-files.md", "mixed.yaml:2: case #1"): "tests/faults/test_faults_eval_input.py (the real messages)",
    ("limits.md", "cases.json: case #2 'huge'"): "tests/faults/test_faults_limits.py (the real messages)",
    ("limits.md", "error: this run plans"): "tests/faults/test_faults_limits.py (the real message)",
    ("eval-files.md", "["): "test_the_eval_file_formats_load_and_run",
    (
        "eval-files.md",
        "# evals/judged.eval.py",
    ): "tests/judges/test_judges_kit.py::test_the_eval_files_doc_example_runs_with_the_demo_agent_and_judge",
    ("eval-files.md", "defaults:            # merged into every test"): "test_the_eval_file_formats_load_and_run",
    ("reports.md", "agent-health run evals --agent demo@v1"): "tests/reports/test_docs.py",
    ("reports.md", "agent-health run evals --agent demo@v2"): "tests/reports/test_docs.py",
    ("reports.md", "agent-health schema report"): "tests/reports/test_docs.py",
    (
        "reports.md",
        "agent-health serve --port 0",
    ): "tests/reporters/test_serve.py::test_the_documented_serve_commands_run",
    (
        "cli.md",
        "agent-health serve --port 0",
    ): "tests/reporters/test_serve.py::test_the_documented_serve_commands_run",
    ("reports.md", "agent-health run evals --agent demo@v2 --shard 1/3"): "tests/reports/test_docs.py",
    (
        "reports.md",
        "::error file=evals/rca.eval.py",
    ): "tests/reporters/test_ci_reporters.py::test_the_documented_annotation_is_what_the_run_prints",
    (
        "reports.md",
        "# .github/workflows/evals.yml",
    ): "tests/reporters/test_ci_reporters.py::test_the_documented_workflow_runs_as_written",
    ("reports.md", ">>> from agent_health import results_frame"): "tests/reports/test_docs.py (doctest)",
    ("reports.md", "agent-health rejudge  # exits 1"): "tests/reports/test_docs.py",
    ("reports.md", ">>> from agent_health.stores import LocalResultStore"): "tests/reports/test_docs.py (doctest)",
    (
        "connectors.md",
        "# agent_health_config.py: Claude Code as the agent under test",
    ): "tests/connectors/test_connectors_claude.py::test_the_documented_config_runs_claude_and_reads_its_stream",
    (
        "connectors.md",
        "# my_agents/rca.py: a python agent",
    ): "tests/connectors/test_connectors_python.py::test_the_documented_python_agent_reports_its_steps_and_usage",
    (
        "connectors.md",
        "# agent_health_config.py: the function above",
    ): "tests/connectors/test_connectors_python.py::test_the_documented_python_agent_reports_its_steps_and_usage",
    (
        "connectors.md",
        "# agent_health_config.py: three framework agents",
    ): "tests/connectors/test_connectors_frameworks.py (the CLI and the headless Dagster job)",
    (
        "connectors.md",
        "# server.py: a pydantic-ai agent over AG-UI",
    ): "tests/connectors/test_connectors_agui_adapters.py (served by uvicorn, as written)",
    (
        "connectors.md",
        "# agent_health_config.py: the AG-UI server above",
    ): "tests/connectors/test_connectors_agui_adapters.py (its endpoint's port replaced)",
    ("extending.md", "[project]"): "tests/core/test_plugins.py (installed and run)",
    (
        "extending.md",
        '"""my_agents/plugin.py',
    ): "tests/core/test_plugins.py (installed and run)",
    (
        "extending.md",
        "# agent_health_config.py",
    ): "tests/core/test_plugins.py (installed and run)",
    ("running.md", "import asyncio"): "tests/session/test_settings.py::test_the_python_example_in_docs_running_runs",
    ("running.md", "timeout: test 'rca::slow-lookup' blocked"): "a message (tests/engine/test_watchdog.py)",
    ("running.md", "agent-health run evals --agent demo@v1 --grep"): "tests/session/test_only.py (as written)",
    ("traces.md", '@test("payment RCA stays cheap"'): "test_the_traces_body_example_runs_on_the_demo_agent",
    ("traces.md", "# agent_health_config.py"): "tests/deploy/test_docs_config.py",
    ("traces.md", '{"trace_id": "'): "test_the_documented_span_line_is_read_by_the_local_source",
    (
        "traces.md",
        "# agent_health_config.py: spans straight from OpenTelemetry",
    ): "tests/traces/test_otel_capture.py::test_the_documented_otel_configuration_captures_a_subprocess_agent",
    ("traces.md", "traces = {"): "test_the_opensearch_traces_settings_build_a_source",
    ("traces.md", "async def my_synthesizer(data)"): "test_the_synthesizer_example_adds_its_insights",
    **{
        ("budgets.md", head): "tests/engine/test_budget.py::test_the_budgets_doc_examples_run_as_written"
        for head in (
            "# agent_health_config.py",
            "agent-health run evals --reporter junit=budget.xml",
            "budget:",
            "stopped early:",
            "# evals/outages.eval.py",
            "agent-health run evals --grep cheap",
            "! errored outages::cheap-triage",
            "agent-health run evals --judge-model acme-judge-2",
            "error: budget: model",
        )
    },
    ("budgets.md", "budget: tokens 4,057 of 4,000"): "tests/faults/test_faults_shards.py (the real merged line)",
    ("judges.md", '{"test_id": "cases::case-05"'): "tests/calibration/test_docs_judges.py",
    ("judges.md", "error: labels file labels.jsonl"): "tests/calibration/test_docs_judges.py (the real message)",
    ("judges.md", "agent-health calibrate --labels labels.csv"): "tests/calibration/test_docs_judges.py",
    ("judges.md", "test_id,agent,label,note"): "tests/calibration/test_docs_judges.py (the worked example)",
    ("judges.md", "judge pass   judge fail"): "tests/calibration/test_docs_judges.py (against calibrate's output)",
    ("judges.md", "# agent_health_config.py"): "tests/calibration/test_docs_judges.py",
    ("judges.md", "warning: judge openai:judge-a"): "tests/calibration/test_docs_judges.py (the real warning)",
    ("judges.md", "agent-health run evals --require-calibrated"): "tests/calibration/test_docs_judges.py",
    (
        "reports.md",
        "partial: 226 of 500",
    ): "tests/analysis/test_compare.py::test_the_documented_partial_comparison_line_is_what_compare_prints",
    (
        "dagster.md",
        "not compared in full:",
    ): "tests/pipeline/test_missing_evidence.py::test_the_documented_message_is_what_the_gate_says",
    **{
        ("eval-files.md", head): "tests/engine/test_conversations.py::test_the_eval_files_doc_examples_run_as_written"
        for head in ("# evals/support.eval.py", "# evals/support.yaml")
    },
    **{
        ("connectors.md", head): "tests/connectors/test_connectors_conversations.py::"
        "test_the_connectors_doc_example_holds_the_conversation_with_each_agent"
        for head in ("# agent_health_config.py: four agents", "# my_agents.py")
    },
}


def blocks() -> list[tuple[str, str, str]]:
    """(file name, language, code) of every fenced block in README.md and docs/*.md."""
    return [(p.name, m.group(1), m.group(2)) for p in DOCS for m in FENCE.finditer(p.read_text())]


def block(file: str, head: str) -> str:
    found = [code for name, _, code in blocks() if name == file and code.lstrip().startswith(head)]
    assert found, f"no block starting {head!r} in {file}"
    return found[0]


def test_every_block_is_exercised():
    unclaimed = []
    for name, _, code in blocks():
        if not any(name == f and code.lstrip().startswith(head) for f, head in EXERCISED):
            unclaimed.append(f"{name}: {code.strip().splitlines()[0][:80]}")
    assert unclaimed == [], "blocks no test claims (add them to EXERCISED with their test):\n" + "\n".join(unclaimed)


def test_every_claim_still_has_its_block():
    heads = [(f, h) for f, h in EXERCISED if not any(n == f and c.lstrip().startswith(h) for n, _, c in blocks())]
    assert heads == []


def test_the_writing_evals_example_runs_with_its_command(tmp_path):
    """docs/writing-evals.md's eval file and commands as written, in a fresh shell whose PATH holds
    no venv, from a project root whose .venv is the one these tests run in (what scripts/main.sh and
    scripts/test.sh make): a bare `agent-health` there is "command not found", so the page must say
    how to reach it."""
    venv = Path(sys.prefix)
    if venv == Path(sys.base_prefix) or not (venv / "bin" / "activate").is_file():
        skip_or_fail("the tests do not run in a venv (scripts/test.sh makes .venv)")
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "payments.eval.py").write_text(block("writing-evals.md", "# evals/payments.eval.py"))
    (tmp_path / ".venv").symlink_to(venv, target_is_directory=True)
    commands = block("writing-evals.md", ". .venv/bin/activate")
    assert "agent-health run evals/" in commands
    shell = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", commands],
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shell.returncode in (0, 1), shell.stdout + shell.stderr  # 127: command not found
    store = LocalResultStore(tmp_path / ".agent_health" / "results")
    results = list(store.get_many(store.list()))
    assert sorted(r.agent for r in results) == ["demo@v1", "demo@v2"]
    assert all(r.status != "errored" for r in results), [r.error for r in results]
    v2 = next(r for r in results if r.agent == "demo@v2")
    assert v2.status == "passed" and v2.labels == ("category:RCA", "difficulty:Hard")


def test_the_eval_file_formats_load_and_run(tmp_path):
    evals = tmp_path / "evals"
    evals.mkdir()
    (evals / "exported.json").write_text(block("eval-files.md", "["))
    (evals / "native.yaml").write_text(block("eval-files.md", "defaults:"))
    loaded = load_tests([evals])
    assert loaded.errors == []
    cases = {t.case.suite: t.case for t in loaded.tests}
    exported, native = cases["exported"], cases["native"]
    assert exported.name == "Payments: database connection refused"
    assert {"payments", "p1", "category:RCA", "difficulty:Medium"} <= set(exported.labels)
    assert exported.expected_trajectory[0].required_tools == ("search_logs",)
    assert native.labels == ("smoke",) and native.timeout_s == 60 and native.epochs == 3
    results = run_tests(loaded.tests, define_config(root=str(tmp_path)), "demo@v2", RunSettings(store=None))
    assert sorted(r.status for r in results) != [] and all(r.status != "errored" for r in results)
    assert next(r for r in results if r.suite == "native").epochs == 3


def test_the_traces_body_example_runs_on_the_demo_agent(tmp_path):
    (tmp_path / "evals").mkdir()
    body = "from agent_health import test, expect\n\n" + block("traces.md", '@test("payment RCA stays cheap"')
    (tmp_path / "evals" / "cheap.eval.py").write_text(body)
    loaded = load_tests([tmp_path / "evals"])
    [result] = run_tests(loaded.tests, define_config(root=str(tmp_path)), "demo@v2", RunSettings(store=None))
    assert result.status == "passed", result.error
    assert {s.name for s in result.signals} >= {"to_be_less_than(20000)", "to_be_less_than(2000)"}


def test_the_documented_span_line_is_read_by_the_local_source(tmp_path):
    from agent_health.traces.local import LocalTraceSource
    from agent_health.traces.source import RunRef
    from agent_health.traces.spans import span_metrics

    text = block("traces.md", '{"trace_id": "')
    trace_id, span_id = "a" * 32, "b" * 16
    line = (
        text.replace("…32 hex…", trace_id)
        .replace("…16 hex…", span_id)
        .replace('"parent_span_id": "…", ', "")
        .replace('"agent_health.run.id": "…"', '"agent_health.run.id": "run-doc"')
    )
    (tmp_path / "spans").mkdir()
    (tmp_path / "spans" / "mine.jsonl").write_text(json.dumps(json.loads(line)) + "\n")
    found = LocalTraceSource(tmp_path / "spans").fetch(RunRef(run_id="run-doc", trace_id=trace_id))
    metrics = span_metrics(found.spans)
    assert (metrics["input_tokens"], metrics["output_tokens"], metrics["llm_calls"]) == (1200, 80, 1)


def test_the_opensearch_traces_settings_build_a_source(tmp_path, monkeypatch):
    from agent_health.traces import build_source

    namespace: dict = {}
    exec(block("traces.md", "traces = {"), namespace)
    monkeypatch.setenv("OPENSEARCH_PASSWORD", "reader-secret")
    settings = dict(namespace["traces"]["settings"])
    settings["ca_certs"] = str(tmp_path / "ca.pem")  # the documented path does not exist here
    (tmp_path / "ca.pem").write_text("")
    config = define_config(root=str(tmp_path), traces={**namespace["traces"], "settings": settings})
    source = build_source(config)
    assert source is not None and "search-my-domain" in source.describe()


def test_the_synthesizer_example_adds_its_insights(tmp_path):
    namespace: dict = {}
    exec("from agent_health import define_config\n" + block("traces.md", "async def my_synthesizer"), namespace)
    config = namespace["config"].model_copy(update={"root": str(tmp_path)})
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "s.eval.py").write_text(
        textwrap.dedent(
            """
            from agent_health import test, expect

            @test("kafka", prompt="orders kafka consumer lag is growing")
            def kafka(agent):
                expect(agent.run()).to_have_called_tool("search_logs")
            """
        )
    )
    [result] = run_tests(load_tests([tmp_path / "evals"]).tests, config, "demo@v2", RunSettings(store=None))
    rules = [i.rule for i in result.insights]
    assert "synthesis" in rules and rules.count("synthesis.recommendation") == 2, rules


@pytest.mark.parametrize("script", ["main.sh", "test.sh"])
def test_the_readme_first_commands_are_the_scripts_that_exist(script):
    assert f"bash scripts/{script}" in block("README.md", "bash scripts/main.sh")
    text = (ROOT / "scripts" / script).read_text()
    assert text.startswith("#!/usr/bin/env bash") and "_venv.sh" in text


def test_ci_runs_the_readme_test_command():
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_main_sh_runs_the_headless_job(tmp_path: Path):
    assert "-m agent_health_dagster.headless" in (ROOT / "scripts" / "main.sh").read_text()
