"""Every AGENT_HEALTH_* variable is declared once: a run setting on RunSettings, a deployment setting
on DeploymentSettings (agent_health/config/deployment.py), or an internal variable on the allow-list
below. Deployment settings are read by one function whose errors name the variable and the value,
the Dagster layer reads them only through it, and docs/deploy.md's table is derived from them."""

from __future__ import annotations

import ast
import re

import pytest
from dagster import ScheduleDefinition, job, op
from pydantic import ValidationError

from agent_health.backends.opensearch import OpenSearchIndex
from agent_health.config import (
    DeploymentSettings,
    check_cron,
    deployment_declarations,
    deployment_settings,
    opensearch_defaults,
)
from agent_health.errors import ConfigError
from agent_health.model.settings import DeclaredSetting, declared_settings
from agent_health.traces.opensearch import OpenSearchTraceSource

from ..conftest import ROOT

VARIABLE = re.compile(r"AGENT_HEALTH_[A-Z0-9]+(?:_[A-Z0-9]+)*")
# Variables the tool sets for, or a connector reads as, its own settings rather than a deployment's.
INTERNAL = {
    "AGENT_HEALTH_RUN_ID": "set for a subprocess agent: the id of its run (connectors/subprocess.py)",
    "AGENT_HEALTH_FILES_DIR": "set for a subprocess agent: the folder of the test's files",
    "AGENT_HEALTH_ARTIFACTS_DIR": "set for a subprocess agent: the folder whose files become artifacts",
    "AGENT_HEALTH_PROCESS_TAG": "set for a subprocess agent: finds its processes that left its group, to kill them",
    "AGENT_HEALTH_DEMO_LATENCY_MS": "the demo agent's `latency_ms` setting (connectors/demo.py, docs/limits.md)",
}
RUN = {d.declared.env for d in declared_settings() if d.declared.env}
DEPLOYMENT = {str(d.declared.env): d for d in deployment_declarations()}
DEPLOYMENT_BY_PATH = {d.path: d for d in deployment_declarations()}


def _strings(package: str) -> dict[str, set[str]]:
    """Each AGENT_HEALTH_* name in a string of `package`'s source (docstrings and f-strings too) ->
    the files it is in; and, under the key "=", the files where a string is exactly one (a read)."""
    found: dict[str, set[str]] = {"=": set()}
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in VARIABLE.findall(node.value):
                    found.setdefault(name, set()).add(rel)
                if VARIABLE.fullmatch(node.value):
                    found["="].add(f"{rel}: {node.value}")
    return found


def test_every_variable_in_the_source_is_declared_once():
    named = set(_strings("agent_health")) | set(_strings("agent_health_dagster"))
    undeclared = named - {"="} - RUN - set(DEPLOYMENT) - set(INTERNAL)
    assert not undeclared, f"declare these (RunSettings, DeploymentSettings) or allow-list them: {undeclared}"
    assert not RUN & set(DEPLOYMENT), "a variable declared as both a run and a deployment setting"
    assert len(DEPLOYMENT) == len(deployment_declarations())  # no variable declared twice
    assert set(INTERNAL) <= named, "an allow-listed variable the source no longer names"


def test_the_dagster_layer_names_no_variable_as_a_value():
    """It reads deployment settings through `deployment_settings` and run settings through
    `build_settings`: no variable name is a string of its own there (descriptions may cite them)."""
    assert _strings("agent_health_dagster")["="] == set()


def test_deployment_settings_are_read_from_the_environment():
    environ = {
        "AGENT_HEALTH_CONFIG": "/app/agent_health_config.py",
        "AGENT_HEALTH_MIN_PASS_RATE": "0.75",
        "AGENT_HEALTH_SUITE_MIN_PASS_RATE": '{"rca/payments": 0.8, "smoke": 1}',
        "AGENT_HEALTH_MAX_ERRORED_SHARE": " 0 ",
        "AGENT_HEALTH_SENSOR_INTERVAL_S": "2",
        "AGENT_HEALTH_SCHEDULE_CRON": "*/30 * * * mon-fri",
        "AGENT_HEALTH_MAX_PARTITIONS_PER_RUN": "0",
        "AGENT_HEALTH_MAX_RUN_SECONDS": "60",
        "AGENT_HEALTH_OPENSEARCH_PASSWORD": "s3cret",
        "AGENT_HEALTH_BASELINE": "",  # blank: the default
        "AGENT_HEALTH_MISSING_EVIDENCE": "WARN",
    }
    s = deployment_settings(environ)
    assert (s.config_path, s.min_pass_rate, s.max_errored_share) == ("/app/agent_health_config.py", 0.75, 0.0)
    assert s.suite_min_pass_rate == {"rca/payments": 0.8, "smoke": 1.0} and s.baseline is None
    assert s.missing_evidence == "warn"
    assert (s.sensor_interval_s, s.schedule_cron, s.max_partitions_per_run, s.max_run_seconds) == (
        2,
        "*/30 * * * mon-fri",
        0,
        60,
    )
    assert s.opensearch.password is not None and s.opensearch.password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)  # a secret never shows in a repr or a log line
    assert deployment_settings({}) == DeploymentSettings()


def test_the_resource_takes_its_deployment_fields_from_the_declarations(monkeypatch):
    from agent_health_dagster.defs.resources import AgentHealthResource, resource_from_env

    own = ("config_path", "eval_root", "state_dir", "min_pass_rate", "suite_min_pass_rate")
    own += ("max_errored_share", "baseline", "missing_evidence")
    declared = DeploymentSettings()
    for name in own:
        assert AgentHealthResource.model_fields[name].get_default(call_default_factory=True) == getattr(declared, name)
        assert DEPLOYMENT_BY_PATH[name].declared.env in str(AgentHealthResource.model_fields[name].description)
    with pytest.raises(ValidationError, match="less than or equal to 1"):  # the declared bounds too
        AgentHealthResource(min_pass_rate=2)
    monkeypatch.setenv("AGENT_HEALTH_SUITE_MIN_PASS_RATE", '{"rca": 0.9}')
    monkeypatch.setenv("AGENT_HEALTH_BASELINE", "demo@v1")
    resource = resource_from_env()
    assert (resource.suite_min_pass_rate, resource.baseline, resource.min_pass_rate) == ({"rca": 0.9}, "demo@v1", 0.5)


def test_traces_and_stores_share_the_opensearch_defaults(monkeypatch):
    assert OpenSearchTraceSource({}).url == OpenSearchIndex({}, "results", {}).url == opensearch_defaults().url
    monkeypatch.setenv("AGENT_HEALTH_OPENSEARCH_URL", "http://127.0.0.1:9")
    assert OpenSearchTraceSource({}).url == OpenSearchIndex({}, "results", {}).url == "http://127.0.0.1:9"
    assert OpenSearchTraceSource({"url": "http://127.0.0.1:1"}).url == "http://127.0.0.1:1"


@pytest.mark.parametrize(
    "name, raw, message",
    [
        # a number that is not one, out of its bounds, or not whole where it must be
        ("AGENT_HEALTH_MIN_PASS_RATE", "high", ": expected a number from 0 to 1, got 'high'"),
        ("AGENT_HEALTH_MIN_PASS_RATE", "1.5", ": expected a number from 0 to 1, got '1.5'"),
        ("AGENT_HEALTH_MAX_ERRORED_SHARE", "nan", ": expected a number from 0 to 1, got 'nan'"),
        ("AGENT_HEALTH_SENSOR_INTERVAL_S", "0", ": expected a whole number from 1 to 86400, got '0'"),
        ("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "2.5", ": expected a whole number from 0 to 1e\\+06, got '2.5'"),
        ("AGENT_HEALTH_MAX_RUN_SECONDS", "-1", ": expected a whole number from 1 to 2.592e\\+06, got '-1'"),
        # JSON that does not parse, is not an object, or holds a rate out of bounds
        ("AGENT_HEALTH_SUITE_MIN_PASS_RATE", "{rca: 0.8}", ": expected a JSON object like .*, got '{rca: 0.8}'"),
        ("AGENT_HEALTH_SUITE_MIN_PASS_RATE", "[0.8]", ": expected a JSON object like .*, got '\\[0.8\\]'"),
        ("AGENT_HEALTH_SUITE_MIN_PASS_RATE", '{"rca": 2}', "\\['rca'\\]: expected a number from 0 to 1, got 2"),
        ("AGENT_HEALTH_SUITE_MIN_PASS_RATE", '{"rca": "x"}', "\\['rca'\\]: expected a number .*, got 'x'"),
        # a cron expression of the wrong shape or with a field out of its range
        ("AGENT_HEALTH_SCHEDULE_CRON", "0 2 * *", ": expected a cron expression .*, got '0 2 \\* \\*'"),
        ("AGENT_HEALTH_SCHEDULE_CRON", "0 25 * * *", ": expected a cron expression .*, got '0 25 \\* \\* \\*'"),
        ("AGENT_HEALTH_SCHEDULE_CRON", "nightly", ": expected a cron expression .*, got 'nightly'"),
        # a choice that is not one of its values
        ("AGENT_HEALTH_MISSING_EVIDENCE", "ignore", ": expected one of fail, warn, got 'ignore'"),
        ("AGENT_HEALTH_EXECUTOR", "dask", ": expected one of in_process, multiprocess, celery, got 'dask'"),
        ("AGENT_HEALTH_EVALUATE_MISSING", "maybe", ": expected true or false .*, got 'maybe'"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_variable_and_the_value(name, raw, message):
    with pytest.raises(ConfigError, match=rf"^\${name}{message}$"):
        deployment_settings({name: raw})


def test_the_dagster_layer_raises_the_config_error(monkeypatch):
    from agent_health_dagster.defs.build import max_partitions_per_run
    from agent_health_dagster.defs.resources import resource_from_env
    from agent_health_dagster.headless import instance_yaml

    monkeypatch.setenv("AGENT_HEALTH_SUITE_MIN_PASS_RATE", "0.8")
    with pytest.raises(ConfigError, match=r"\$AGENT_HEALTH_SUITE_MIN_PASS_RATE"):
        resource_from_env()
    monkeypatch.delenv("AGENT_HEALTH_SUITE_MIN_PASS_RATE")
    monkeypatch.setenv("AGENT_HEALTH_MAX_RUN_SECONDS", "forever")
    with pytest.raises(ConfigError, match=r"\$AGENT_HEALTH_MAX_RUN_SECONDS: .* got 'forever'"):
        instance_yaml()
    monkeypatch.setenv("AGENT_HEALTH_MAX_RUN_SECONDS", "90")
    assert "max_runtime_seconds: 90" in instance_yaml()
    monkeypatch.setenv("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "0")
    assert max_partitions_per_run() is None


@op
def _noop() -> None:
    pass


@job
def _a_job() -> None:
    _noop()


GOOD_CRON = ["0 2 * * *", "*/15 * * * *", "0 0-6/2 1,15 jan-mar mon-fri", "30 4 * * 7", "@daily", "@hourly"]
BAD_CRON = ["0 2 * *", "61 * * * *", "0 2 * * * *", "* * 0 * *", "*/0 * * * *", "0 2 * foo *", ""]


@pytest.mark.parametrize("cron", GOOD_CRON)
def test_a_cron_expression_the_check_takes_is_one_dagster_takes(cron):
    assert check_cron(cron) == cron
    ScheduleDefinition(name="nightly", cron_schedule=cron, job=_a_job)  # raises when Dagster refuses it


@pytest.mark.parametrize("cron", BAD_CRON)
def test_a_cron_expression_the_check_refuses_is_one_dagster_refuses(cron):
    with pytest.raises(ConfigError, match="expected a cron expression"):
        check_cron(cron)
    with pytest.raises(Exception, match="(?i)cron"):
        ScheduleDefinition(name="nightly", cron_schedule=cron, job=_a_job)


def _default(d: DeclaredSetting) -> str:
    value = getattr(DeploymentSettings(), d.path.split(".")[0])
    for part in d.path.split(".")[1:]:
        value = getattr(value, part)
    if value is None or value == {}:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`" if isinstance(value, str) else f"{value:,}" if isinstance(value, int) else str(value)


def _accepts(d: DeclaredSetting) -> str:
    lo, hi, _ = d.bounds
    if d.declared.parse == "json":
        return f"JSON object, each {lo:g} to {hi:g}"
    if d.declared.parse == "cron":
        return "cron expression (UTC) or @daily, ..."
    if d.choices:
        return "one of " + ", ".join(f"`{c}`" for c in d.choices)
    if d.annotation is bool:
        return "`true` or `false` (also 1/0, yes/no, on/off)"
    if d.annotation is int:
        return f"whole number, {int(lo or 0):,} to {int(hi or 0):,}"
    if d.annotation is float:
        return f"number, {lo:g} to {hi:g}"
    if d.choices is not None:
        return "one of " + ", ".join(f"`{c}`" for c in d.choices)
    return "text"


def deployment_table() -> str:
    """docs/deploy.md's table, as the declarations give it."""
    rows = ["| Variable | Default | Takes | What |", "| --- | --- | --- | --- |"]
    for d in deployment_declarations():
        desc = str(d.field.description).replace("|", "\\|")
        rows.append(f"| `{d.declared.env}` | {_default(d)} | {_accepts(d)} | {desc} |")
    return "\n".join(rows)


def test_the_docs_table_is_derived_from_the_declarations():
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text.split("## 6. Environment variables of a deployment", 1)[1]
    table = next(block for block in section.split("\n\n") if block.startswith("| Variable |")).strip()
    assert table == deployment_table(), "docs/deploy.md's table should read:\n" + deployment_table()
    pipeline = (ROOT / "docs" / "pipeline.md").read_text()
    assert "](deploy.md#6-environment-variables-of-a-deployment)" in pipeline
