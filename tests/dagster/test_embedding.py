"""agent-health inside a team's own Dagster project (docs/dagster.md, "Add agent-health to your own
Dagster project"): the documented definitions.py, run as written, merges the team's asset with two
eval roots; the sensors register each root's partitions and request its runs, which run in one
instance; the team's asset, executor and resource are the ones used. The `dg` component of the same
section loads through Dagster's public component loader. The repository's own entry file
(definitions.py) stays out of the wheel."""

from __future__ import annotations

import runpy
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.core.test_docs_examples import block

ROOT = Path(__file__).resolve().parents[2]

# Two eval roots with a suite of the same name and the same demo agent versions: nothing may collide.
SUITES = {
    "support": """
        tests:
          - name: payment outage
            prompt: Diagnose why the payment service is failing. Connection refused to db-primary:5432
            expected_tools: [search_logs]
          - name: impossible tool
            prompt: Diagnose why the payment service is failing.
            expected_tools: [a_tool_no_agent_has]
        """,
    "billing": """
        tests:
          - name: invoice tool
            prompt: Why are invoices late?
            expected_tools: [a_tool_no_agent_has]
        """,
}
OUTCOMES = {  # per root: test partition key -> how it ends, for every demo version
    "support": {"payment-outage": "passed", "impossible-tool": "failed"},
    "billing": {"invoice-tool": "failed"},
}


def write_eval_root(folder: Path, suite_yaml: str) -> None:
    (folder / "evals").mkdir(parents=True)
    (folder / "evals" / "triage.yaml").write_text(textwrap.dedent(suite_yaml))
    (folder / "agent_health_config.py").write_text("from agent_health import define_config\nconfig = define_config()\n")


def sensor_result(defs: Any, instance: Any, name: str, resource_key: str) -> Any:
    """A sensor of `defs` evaluated as the daemon does, its partition requests and events applied."""
    from dagster import build_sensor_context

    from agent_health_dagster.headless import apply_sensor_result

    context = build_sensor_context(
        instance=instance, resources={resource_key: defs.resources[resource_key]}, definitions=defs
    )
    result = defs.resolve_sensor_def(name)(context)
    apply_sensor_result(instance, result)
    return result


def outcomes(instance: Any, key: Any, run_ids: set[str]) -> dict[str, str]:
    """Each results partition those runs materialized -> the status its outcome observation says."""
    out: dict[str, str] = {}
    for record in instance.fetch_observations(key, limit=1000).records:  # newest first
        if record.run_id in run_ids and str(record.partition_key) not in out:
            out[str(record.partition_key)] = record.asset_observation.metadata["status"].value
    return out


@pytest.fixture
def team_project(tmp_path: Path) -> Path:
    """The documented my_project/: its definitions.py as written and two eval roots."""
    project = tmp_path / "my_project"
    project.mkdir()
    code = block("dagster.md", "# my_project/definitions.py")
    (project / "definitions.py").write_text(code)
    for name, suite in SUITES.items():
        write_eval_root(project / name, suite)
    return project


def test_a_team_project_merges_two_eval_roots_and_materializes_each(team_project, instance):
    from dagster import AssetKey, Definitions

    from agent_health_dagster.defs.automation import is_evaluation
    from agent_health_dagster.defs.namespace import Namespace

    module = runpy.run_path(str(team_project / "definitions.py"))
    defs: Definitions = module["defs"]
    Definitions.validate_loadable(defs)  # one repository: no two jobs, ops or sensors share a name

    jobs = [j.name for j in defs.jobs or []]
    sensors = [s.name for s in defs.sensors or []]
    assert len(jobs) == len(set(jobs)) and len(sensors) == len(set(sensors))
    assert {"support__refresh", "billing__refresh", "evaluate__support__triage", "evaluate__billing__triage"} <= set(
        jobs
    )
    assert set(defs.resources or {}) == {"warehouse", "support__agent_health", "billing__agent_health"}
    assert defs.resources["warehouse"] is module["warehouse"]  # the team's resource, once
    # the team's executor runs every job: each eval root's and the implicit one of backfills and the UI
    assert {j.name for j in defs.resolve_all_job_defs() if j.executor_def is not module["executor"]} == set()

    # the team's own asset, with its resource, in the same instance
    team = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance, asset_selection=[AssetKey("orders")]
    )
    assert team.success and team.output_for_node("orders") == "orders from postgresql://warehouse/analytics"

    runs_of: dict[str, set[str]] = {}
    for prefix, expected in OUTCOMES.items():
        resource_key = f"{prefix}__agent_health"
        sensor_result(defs, instance, f"{prefix}__agent_versions_sensor", resource_key)
        versions = list(instance.get_dynamic_partitions(f"{prefix}__agent_versions"))
        assert versions == ["demo@v1", "demo@v2"]
        result = sensor_result(defs, instance, f"{prefix}__eval_files_sensor", resource_key)
        assert list(instance.get_dynamic_partitions(f"tests__{prefix}__triage")) == list(expected)
        job = f"evaluate__{prefix}__triage"
        assert result.run_requests and {r.job_name for r in result.run_requests} == {job}
        job_def = defs.resolve_job_def(job)
        assert job_def.executor_def is module["executor"]  # the team's executor runs the evaluations
        run_ids: set[str] = set()
        runs_of[prefix] = run_ids
        for request in result.run_requests:  # what the daemon launches for this sensor
            run = job_def.execute_in_process(instance=instance, tags=request.tags, raise_on_error=False)
            assert run.success
            run_ids.add(run.run_id)
        results = AssetKey([prefix, "triage", "results"])
        want = {f"{agent}|{test}": status for agent in versions for test, status in expected.items()}
        assert outcomes(instance, results, run_ids) == want
        assert set(instance.get_materialized_partitions(results)) == set(want)
        # each root's results are in its own store, beside its configuration
        stored = list((team_project / prefix / ".agent_health").rglob("*.json*"))
        assert stored, f"{prefix}: no stored result"

    # each root's refresh sensor counts only its own root's evaluation runs
    for prefix in runs_of:
        for other, other_ids in runs_of.items():
            for run_id in other_ids:
                assert is_evaluation(instance.get_run_by_id(run_id), Namespace(prefix)) is (other == prefix)

    # nothing of the code location's own names was touched: the roots share no partition set
    assert list(instance.get_dynamic_partitions("agent_versions")) == []
    assert list(instance.get_dynamic_partitions("tests__triage")) == []


def test_a_root_without_a_prefix_keeps_the_code_locations_names(team_project):
    from agent_health_dagster import agent_health_definitions

    root = team_project / "support"
    defs = agent_health_definitions(root / "evals", config_path=root / "agent_health_config.py")
    assert {"refresh", "evaluate__triage", "calibrate", "leaderboard"} <= {j.name for j in defs.jobs or []}
    assert "eval_files_sensor" in {s.name for s in defs.sensors or []}
    assert set(defs.resources or {}) == {"agent_health"}


def test_a_prefix_that_is_not_a_dagster_name_is_refused_naming_it(team_project):
    from agent_health.errors import ConfigError
    from agent_health_dagster import agent_health_definitions

    root = team_project / "support"
    with pytest.raises(ConfigError, match=r"prefix 'team-a'.*'team_a'"):
        agent_health_definitions(config_path=root / "agent_health_config.py", prefix="team-a")


def test_the_dg_component_loads_from_a_defs_yaml_file(tmp_path, monkeypatch):
    """The documented defs.yaml in a `dg` project, loaded by dagster.components.load_from_defs_folder."""
    from dagster import AssetKey, Definitions, load_from_defs_folder

    project = tmp_path / "my_project"
    yaml = block("dagster.md", "# my_project/defs/support_evals/defs.yaml")
    folder = project / "my_project" / "defs" / "support_evals"
    write_eval_root(folder, SUITES["support"])
    (folder / "defs.yaml").write_text(yaml)
    for package in (project / "my_project", project / "my_project" / "defs"):
        (package / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(
        '[project]\nname = "my-project"\nversion = "0"\n\n'
        '[tool.dg]\ndirectory_type = "project"\n\n[tool.dg.project]\nroot_module = "my_project"\n'
    )
    monkeypatch.syspath_prepend(str(project))
    defs = load_from_defs_folder(path_within_project=project)
    Definitions.validate_loadable(defs)
    keys = set(defs.resolve_all_asset_keys())
    assert {AssetKey(["support", "triage", "results"]), AssetKey(["support", "agents", "settings"])} <= keys
    assert "evaluate__support__triage" in {j.name for j in defs.resolve_all_job_defs()}
    resource = defs.resources["support__agent_health"]
    assert Path(resource.eval_root) == folder / "evals"  # relative to the defs.yaml folder
    assert Path(resource.config_path) == folder / "agent_health_config.py"


def test_the_repositorys_definitions_py_is_what_workspace_yaml_loads_and_is_not_in_the_wheel():
    from setuptools import find_packages

    import definitions
    from agent_health_dagster.definitions import defs

    workspace = (ROOT / "workspace.yaml").read_text()
    assert "module_name: definitions\n" in workspace and "attribute: defs" in workspace
    assert definitions.defs is defs
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "py-modules" not in setuptools  # a top-level module ships only when listed there
    packages = find_packages(str(ROOT), include=setuptools["packages"]["find"]["include"])
    assert "definitions" not in {p.split(".")[0] for p in packages}


def test_the_public_names_are_importable_and_the_package_import_stays_light():
    import subprocess
    import sys

    import agent_health_dagster
    from agent_health_dagster.component import AgentHealthComponent
    from agent_health_dagster.defs.resources import AgentHealthResource
    from agent_health_dagster.embed import agent_health_definitions

    assert agent_health_dagster.__all__ == ["AgentHealthComponent", "AgentHealthResource", "agent_health_definitions"]
    assert agent_health_dagster.AgentHealthComponent is AgentHealthComponent
    assert agent_health_dagster.AgentHealthResource is AgentHealthResource
    assert agent_health_dagster.agent_health_definitions is agent_health_definitions
    assert set(agent_health_dagster.__all__) <= set(dir(agent_health_dagster))
    script = "import sys, agent_health_dagster; print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_dg_finds_the_component_through_the_registry_entry_point():
    """`dg list components` lists the component types of the modules under this entry-point group."""
    import importlib

    from dagster import Component

    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    module = importlib.import_module(entry["dagster_dg_cli.registry_modules"]["agent_health_dagster"])
    assert issubclass(module.AgentHealthComponent, Component)
