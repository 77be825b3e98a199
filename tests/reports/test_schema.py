"""The published JSON Schemas: in step with the models, and real output validates against them."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from agent_health import RunReport
from agent_health.analysis.compare import compare_results
from agent_health.cli.schema import NAMES, published_path, schema_for, schema_text
from tests.support.cli import cli_in_process


@pytest.mark.parametrize("name", NAMES)
def test_published_schema_matches_the_models(name):
    path = published_path(name)
    assert path.is_file(), f"{path} is missing: run `agent-health schema --update`"
    assert path.read_text() == schema_text(name), (
        f"the {name} models changed but {path.name} was not regenerated: run `agent-health schema --update` "
        "(and bump SCHEMA_VERSION when the change is not backwards compatible)"
    )
    Draft202012Validator.check_schema(json.loads(path.read_text()))


def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(published_path(name).read_text()))


def test_real_reports_results_runs_and_comparisons_validate(report_project):
    for report_file in (report_project.both, report_project.hostile):
        data = json.loads(report_file.read_text())
        assert list(_validator("report").iter_errors(data)) == []
    stored = [line for log in report_project.store.root.glob("_runs/*/results.jsonl") for line in log.open()]
    assert stored  # every result as stored: its run's log holds it
    for line in stored:
        assert list(_validator("result").iter_errors(json.loads(line))) == []
    run_file = report_project.store.root / "_runs" / report_project.run_ids["both"] / "run.json"
    assert list(_validator("run").iter_errors(json.loads(run_file.read_text()))) == []
    v1 = RunReport.model_validate_json(report_project.v1.read_bytes())
    v2 = RunReport.model_validate_json(report_project.v2.read_bytes())
    cmp = compare_results(v1.results, v2.results).model_dump(mode="json")
    assert list(_validator("comparison").iter_errors(cmp)) == []


def test_the_schemas_reject_what_agent_health_never_writes(report_project):
    data = json.loads(report_project.v1.read_text())
    data["results"][0]["status"] = "sort of passed"
    del data["results"][1]["test_id"]
    errors = {e.message for e in _validator("report").iter_errors(data)}
    assert any("'sort of passed' is not one of" in m for m in errors)
    assert any("'test_id' is a required property" in m for m in errors)


def test_schema_command_prints_or_writes_each_schema(tmp_path):
    p = cli_in_process("schema", "result", cwd=tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout) == schema_for("result")
    assert json.loads(p.stdout)["$id"] == "urn:agent-health:schema:result:v1"
    out = tmp_path / "report.schema.json"
    assert cli_in_process("schema", "-o", str(out), cwd=tmp_path).returncode == 0
    assert json.loads(out.read_text())["title"] == "RunReport"
    bad = cli_in_process("schema", "nonsense", cwd=tmp_path)
    assert bad.returncode == 2 and "nonsense" in bad.stderr
