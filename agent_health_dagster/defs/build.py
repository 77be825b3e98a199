"""Assembling the Definitions from the project's eval files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dagster import AssetSelection, AssetSpec, Definitions, define_asset_job

from agent_health.pipeline import Project, deployment_settings
from agent_health_dagster.defs.automation import build_automation, sensor_interval
from agent_health_dagster.defs.benchmark_assets import build_benchmark_assets
from agent_health_dagster.defs.calibration_assets import build_calibration_assets, build_calibration_sensor
from agent_health_dagster.defs.names import (
    CALIBRATE_JOB,
    CALIBRATION_KEY,
    COMPARISON_KEY,
    LEADERBOARD_KEY,
    REFRESH_JOB,
    suite_names,
)
from agent_health_dagster.defs.partitions import AGENT_SETTINGS_KEY, agent_versions
from agent_health_dagster.defs.rejudge import build_rejudge_jobs
from agent_health_dagster.defs.resources import AgentHealthResource, resource_from_env
from agent_health_dagster.defs.suite_assets import SuiteAssets, build_suite_assets


def max_partitions_per_run() -> int | None:
    """Partitions per evaluation run: $AGENT_HEALTH_MAX_PARTITIONS_PER_RUN (None: any number, one
    run), default 1,000; why runs are bounded is with its declaration (DeploymentSettings)."""
    return deployment_settings().max_partitions_per_run or None


def build_suites(project: Project) -> list[SuiteAssets]:
    """One asset set per eval file under the eval root (files are discovered, not imported)."""
    files = project.suite_files()
    names = suite_names(files)
    limit = max_partitions_per_run()
    return [build_suite_assets(names[s], files[s], project.eval_root, limit) for s in sorted(files)]


def build_jobs(suites: list[SuiteAssets]) -> dict[str, Any]:
    """Per suite its evaluate job (results) keyed by suite; the `refresh` job (every suite's metrics,
    insights and rollup, the comparison, and the leaderboard: one run for a range of agent versions)
    and the `leaderboard` job keyed by their names."""
    jobs: dict[str, Any] = {
        s.suite: define_asset_job(
            s.names.job,
            selection=AssetSelection.assets(s.key("results")),
            description=f"Evaluate {s.source_file}: the results of a range of (agent version x test) "
            "partitions in one run.",
        )
        for s in suites
    }
    summaries = [k for s in suites for k in s.summary_keys]
    jobs[REFRESH_JOB] = define_asset_job(
        REFRESH_JOB,
        selection=AssetSelection.assets(*summaries, COMPARISON_KEY, LEADERBOARD_KEY),
        description="Everything downstream of the results, in one run for a range of agent versions: every "
        "suite's metrics, insights and rollup (with its checks), each version's comparison, and the leaderboard.",
    )
    jobs["leaderboard"] = define_asset_job(
        "leaderboard",
        selection=AssetSelection.assets(LEADERBOARD_KEY),
        description="The leaderboard across suites and agent versions.",
    )
    jobs[CALIBRATE_JOB] = define_asset_job(
        CALIBRATE_JOB,
        selection=AssetSelection.assets(CALIBRATION_KEY),
        description="Calibrate a range of judge identities (partitions of judges/calibration) against the stored "
        "human labels, in one run (docs/judges.md); the calibration sensor requests it when labels change.",
    )
    return jobs


AGENT_SETTINGS = AssetSpec(
    key=AGENT_SETTINGS_KEY,
    partitions_def=agent_versions,
    group_name="agents",
    kinds={"python"},
    description="Per agent version: its effective settings (secrets excluded) and the judge settings, reported "
    "as a data version by the agent_versions sensor; results depend on it, so a change marks them stale.",
)


@dataclass
class Pipeline:
    """The Definitions plus what built them (the headless job and tests drive these)."""

    defs: Definitions
    suites: list[SuiteAssets]
    resource: AgentHealthResource
    project: Project


def build_pipeline(resource: AgentHealthResource | None = None) -> Pipeline:
    """The code location: eval root and configuration found like the CLI finds them, overridable
    by environment variables (see `resources.resource_from_env`)."""
    resource = resource or resource_from_env()
    project = resource.project()
    suites = build_suites(project)
    assets = [
        AGENT_SETTINGS,
        *[a for s in suites for a in s.definitions],
        *build_benchmark_assets(suites),
        *build_calibration_assets(suites),
    ]
    jobs = build_jobs(suites)
    sensors, schedules = build_automation(suites, jobs)
    sensors.append(build_calibration_sensor(jobs[CALIBRATE_JOB], sensor_interval()))
    defs = Definitions(
        assets=assets,
        jobs=[*jobs.values(), *build_rejudge_jobs(suites)],
        sensors=sensors,
        schedules=schedules,
        resources={"agent_health": resource},
    )
    return Pipeline(defs=defs, suites=suites, resource=resource, project=project)


def build_definitions(resource: AgentHealthResource | None = None) -> Definitions:
    """Just the Definitions of `build_pipeline`."""
    return build_pipeline(resource).defs
