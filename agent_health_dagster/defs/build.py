"""Assembling the Definitions from the project's eval files."""

from __future__ import annotations

import importlib
import multiprocessing
from dataclasses import dataclass
from typing import Any, Literal

from dagster import (
    AssetSelection,
    AssetSpec,
    Definitions,
    ExecutorDefinition,
    Field,
    define_asset_job,
    multi_or_in_process_executor,
)

from agent_health.errors import AgentHealthError, ConfigError
from agent_health.pipeline import (
    DeploymentSettings,
    Project,
    RunSettings,
    deployment_settings,
    deployment_variable,
    sized_run_seconds,
)
from agent_health_dagster.defs.automation import build_automation, sensor_interval
from agent_health_dagster.defs.benchmark_assets import build_benchmark_assets
from agent_health_dagster.defs.calibration_assets import build_calibration_assets, build_calibration_sensor
from agent_health_dagster.defs.names import CALIBRATE_JOB, REFRESH_JOB, suite_names
from agent_health_dagster.defs.namespace import DEFAULT, Namespace
from agent_health_dagster.defs.rejudge import build_rejudge_jobs
from agent_health_dagster.defs.resources import AgentHealthResource, resource_from_env
from agent_health_dagster.defs.retries import build_missed_retry_sensor
from agent_health_dagster.defs.suite_assets import SuiteAssets, build_suite_assets


def max_partitions_per_run() -> int | None:
    """Partitions per evaluation run: $AGENT_HEALTH_MAX_PARTITIONS_PER_RUN (None: any number, one
    run), default 1,000; why runs are bounded is with its declaration (DeploymentSettings)."""
    return deployment_settings().max_partitions_per_run or None


# The partitions a run is sized for when runs are not bounded ($AGENT_HEALTH_MAX_PARTITIONS_PER_RUN=0).
UNBOUNDED_RUN_SIZE = 1000


def run_limit_seconds(resource: AgentHealthResource | None = None, lenient: bool = False) -> int:
    """The maximum runtime of a run that the project's dagster.yaml gives run monitoring:
    $AGENT_HEALTH_MAX_RUN_SECONDS, else sized from what an evaluation run can take (partitions per
    run, and the concurrency, timeout and epochs of the project's run settings). `lenient`: a
    configuration that does not load is sized with the default run settings instead of raising
    (the instance is written before `dagster dev` starts; its runs name the error)."""
    settings = deployment_settings()
    if settings.max_run_seconds is not None:
        return settings.max_run_seconds
    try:
        run = (resource or resource_from_env()).run_settings()
    except AgentHealthError:
        if not lenient:
            raise
        run = RunSettings()
    partitions = settings.max_partitions_per_run or UNBOUNDED_RUN_SIZE
    return sized_run_seconds(partitions, run.concurrency, run.timeout_s, run.epochs)


# Celery settings of the run workers (which send steps) and of the Celery workers (which take them):
# a busy worker takes no further step while it runs one (`worker_disable_prefetch`, Redis only:
# with prefetching a busy worker reserves the next step while another worker idles), and a step is
# acknowledged when a worker starts it, so a worker that dies leaves nothing for the broker to hand
# out again later: run monitoring fails the run at its limit and run retries start it again.
CELERY_CONFIG: dict[str, Any] = {
    "worker_prefetch_multiplier": 1,
    "worker_disable_prefetch": True,
    "broker_connection_retry_on_startup": True,
}


def celery_urls(settings: DeploymentSettings | None = None) -> tuple[str, str]:
    """(broker, result backend) URLs of the Celery route: $AGENT_HEALTH_CELERY_BROKER and
    $AGENT_HEALTH_CELERY_BACKEND (default: the broker)."""
    settings = settings or deployment_settings()
    if settings.celery_broker is None:
        raise ConfigError(
            "$AGENT_HEALTH_EXECUTOR=celery needs $AGENT_HEALTH_CELERY_BROKER, the broker URL "
            "(redis://host:6379/0) of the run workers and the Celery workers"
        )
    broker = settings.celery_broker.get_secret_value()
    backend = settings.celery_backend.get_secret_value() if settings.celery_backend else broker
    return broker, backend


def celery_module(name: str) -> Any:
    """A module of dagster-celery (the `celery` extra), imported only by a deployment that uses it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(
            f"$AGENT_HEALTH_EXECUTOR=celery needs the celery extra: pip install -c constraints.txt '.[celery]' ({exc})"
        ) from None


def _forked(config: dict[str, Any]) -> dict[str, Any]:
    """A run's executor config with `forkserver` as the multiprocess start method unless the run
    names one or the platform has no forkserver (Windows: Dagster's `spawn`); `in_process` and
    every other setting pass through."""
    if "multiprocess" not in config or "forkserver" not in multiprocessing.get_all_start_methods():
        return config
    multiprocess = dict(config["multiprocess"] or {})
    multiprocess.setdefault("start_method", {"forkserver": {}})
    return {**config, "multiprocess": multiprocess}


def steps_executor(default: Literal["in_process", "multiprocess"]) -> ExecutorDefinition:
    """Dagster's default executor, `in_process` or `multiprocess` by run config and `default` when
    the run config names neither, with multiprocess steps forked from a server that imported the
    code location once (the `forkserver` start method) instead of a new interpreter importing
    Dagster and the eval root again for every step: a refresh run of the demo's 7 steps took 11 s
    and 15 s of CPU instead of 16-18 s and 24-27 s; in the run worker (`in_process`), 3.2 s and
    3.2 s (docs/deploy.md). A run config naming its own start method keeps it."""
    schema = multi_or_in_process_executor.config_schema.as_field()
    executor: ExecutorDefinition = multi_or_in_process_executor.configured(
        _forked,
        name=multi_or_in_process_executor.name,
        config_schema=Field(schema.config_type, default_value={default: {}}, is_required=False),
    )
    return executor


def build_executor(settings: DeploymentSettings | None = None) -> ExecutorDefinition:
    """The executor of every job ($AGENT_HEALTH_EXECUTOR): `steps_executor` with that default
    (`in_process` or `multiprocess`), or dagster-celery's with the broker and backend read from
    their variables when the run worker starts (a URL with a password never reaches the run
    config or the UI)."""
    settings = settings or deployment_settings()
    if settings.executor != "celery":
        return steps_executor(settings.executor)
    celery_urls(settings)  # refuse a missing broker when the definitions load
    executor: ExecutorDefinition = celery_module("dagster_celery").celery_executor.configured(
        {
            "broker": {"env": deployment_variable("celery_broker")},
            "backend": {"env": deployment_variable("celery_backend" if settings.celery_backend else "celery_broker")},
            "config_source": CELERY_CONFIG,
        },
        name="celery",
    )
    return executor


def build_suites(project: Project, ns: Namespace = DEFAULT) -> list[SuiteAssets]:
    """One asset set per eval file under the eval root (files are discovered, not imported)."""
    files = project.suite_files()
    names = suite_names(files, ns.key_prefix)
    limit = max_partitions_per_run()
    return [build_suite_assets(names[s], files[s], project.eval_root, limit, ns) for s in sorted(files)]


def build_jobs(suites: list[SuiteAssets], ns: Namespace = DEFAULT) -> dict[str, Any]:
    """Per suite its evaluate job (results) keyed by suite; the `refresh` job (every suite's metrics,
    insights and rollup, the comparison, and the leaderboard: one run for a range of agent versions),
    the `leaderboard` and `calibrate` jobs keyed by their names in the default namespace."""
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
        ns.refresh_job,
        selection=AssetSelection.assets(*summaries, ns.comparison_key, ns.leaderboard_key),
        description="Everything downstream of the results, in one run for a range of agent versions: every "
        "suite's metrics, insights and rollup (with its checks), each version's comparison, and the leaderboard.",
    )
    jobs["leaderboard"] = define_asset_job(
        ns.leaderboard_job,
        selection=AssetSelection.assets(ns.leaderboard_key),
        description="The leaderboard across suites and agent versions.",
    )
    jobs[CALIBRATE_JOB] = define_asset_job(
        ns.calibrate_job,
        selection=AssetSelection.assets(ns.calibration_key),
        description="Calibrate a range of judge identities (partitions of judges/calibration) against the stored "
        "human labels, in one run (docs/judges.md); the calibration sensor requests it when labels change.",
    )
    return jobs


def agent_settings_spec(ns: Namespace = DEFAULT) -> AssetSpec:
    return AssetSpec(
        key=ns.settings_key,
        partitions_def=ns.agent_versions_def,
        group_name=ns.name("agents"),
        kinds={"python"},
        description="Per agent version: its effective settings (secrets excluded) and the judge settings, reported "
        "as a data version by the agent_versions sensor; results depend on it, so a change marks them stale.",
    )


AGENT_SETTINGS = agent_settings_spec()


@dataclass
class Pipeline:
    """The Definitions plus what built them (the headless job and tests drive these)."""

    defs: Definitions
    suites: list[SuiteAssets]
    resource: AgentHealthResource
    project: Project
    namespace: Namespace = DEFAULT


_FROM_ENV: Any = object()  # build_pipeline's executor when not given: $AGENT_HEALTH_EXECUTOR's


def build_pipeline(
    resource: AgentHealthResource | None = None,
    namespace: Namespace = DEFAULT,
    executor: ExecutorDefinition | None = _FROM_ENV,
    resources: dict[str, Any] | None = None,
) -> Pipeline:
    """The code location: eval root and configuration found like the CLI finds them, overridable
    by environment variables (see `resources.resource_from_env`). `namespace`: the names of this
    eval root's definitions (the default: the code location's own); `executor`: every job's
    (default: $AGENT_HEALTH_EXECUTOR's, `build_executor`; None: the Definitions it is merged into
    decide); `resources`: more resources beside the agent-health one."""
    resource = resource or resource_from_env()
    project = resource.project()
    ns = namespace
    suites = build_suites(project, ns)
    assets = [
        agent_settings_spec(ns),
        *[a for s in suites for a in s.definitions],
        *build_benchmark_assets(suites, ns),
        *build_calibration_assets(suites, ns),
    ]
    jobs = build_jobs(suites, ns)
    sensors, schedules = build_automation(suites, jobs, ns)
    sensors.append(build_calibration_sensor(jobs[CALIBRATE_JOB], sensor_interval(), ns))
    sensors.append(build_missed_retry_sensor(list(jobs.values()), sensor_interval(), ns.name("missed_retries_sensor")))
    if ns.resource_key in (resources or {}):
        raise ConfigError(
            f"resource key {ns.resource_key!r} is agent-health's own for this eval root; name the other resource "
            "differently, or pass the AgentHealthResource itself as `resource`"
        )
    defs = Definitions(
        assets=assets,
        jobs=[*jobs.values(), *build_rejudge_jobs(suites)],
        sensors=sensors,
        schedules=schedules,
        resources={**(resources or {}), ns.resource_key: resource},
        executor=build_executor() if executor is _FROM_ENV else executor,
    )
    return Pipeline(defs=defs, suites=suites, resource=resource, project=project, namespace=ns)


def build_definitions(resource: AgentHealthResource | None = None) -> Definitions:
    """Just the Definitions of `build_pipeline`."""
    return build_pipeline(resource).defs
