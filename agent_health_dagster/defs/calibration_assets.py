"""Judge calibration: the human labels (stored beside the results by `agent-health calibrate` or
the HTML report) and, downstream of them and of every suite's results, the calibration of each
judge identity, one partition per identity (`judge_identities`) with its `judges_calibrated`
check on that partition. `calibration_sensor` adds an identity's partition when its first
labelled verdict appears and requests a calibration of the identities whose labelled verdicts
changed. The library computes it all (agent_health.pipeline.calibration); this maps it to
metadata, partitions and runs."""

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dagster import (
    AddDynamicPartitionsRequest,
    AllPartitionMapping,
    AssetCheckEvaluation,
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    AssetObservation,
    AssetSpec,
    BackfillPolicy,
    DefaultSensorStatus,
    MaterializeResult,
    Output,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    multi_asset,
    sensor,
)

from agent_health.pipeline import (
    JUDGES_CALIBRATED,
    LabelledJudges,
    Project,
    Table,
    calibrate_identities,
    labelled_judges,
)
from agent_health_dagster.defs.beta import beta_api
from agent_health_dagster.defs.namespace import DEFAULT, Namespace
from agent_health_dagster.defs.partitions import (
    DATA_VERSION_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    contiguous_blocks,
    ordered_after,
)
from agent_health_dagster.defs.resources import AgentHealthResource
from agent_health_dagster.defs.suite_assets import OWNERS, SuiteAssets, clean, gate_evaluations
from agent_health_dagster.defs.tables import table_value

GROUP = "judges"


def labels_spec(ns: Namespace = DEFAULT) -> AssetSpec:
    return AssetSpec(
        key=ns.labels_key,
        group_name=ns.name(GROUP),
        owners=OWNERS,
        kinds={"python"},
        description="Human labels of judge verdicts (pass/fail per test, agent version or run, and claim), stored "
        "beside the results by `agent-health calibrate --labels FILE` (docs/judges.md); observed by the "
        "calibration sensor (labels, unmatched labels, judge identities labelled).",
    )


LABELS = labels_spec()


def _metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    return clean({k: table_value(v) if isinstance(v, Table) else v for k, v in meta.items()})


def build_calibration_assets(suites: Sequence[SuiteAssets], ns: Namespace = DEFAULT) -> list[Any]:
    """The labels (external) and the calibration asset, partitioned by judge identity."""
    calibration_key, judge_identities = ns.calibration_key, ns.judge_identities_def
    every = AllPartitionMapping()  # an identity's calibration reads every labelled result
    with beta_api("a check on each judge identity's partition says whether that judge is calibrated (PreviewWarning)"):
        check = AssetCheckSpec(
            JUDGES_CALIBRATED,
            asset=calibration_key,
            partitions_def=judge_identities,
            description="This judge identity meets judge.calibration (min_kappa, min_labels); a gating judge "
            "that does not only observes.",
        )

        @multi_asset(
            name=ns.name("judges__calibrate"),
            specs=[
                AssetSpec(
                    key=calibration_key,
                    group_name=ns.name(GROUP),
                    owners=OWNERS,
                    kinds={"python", "table"},
                    tags={"agent_health/layer": "judges"},
                    partitions_def=judge_identities,
                    deps=[
                        AssetDep(ns.labels_key, partition_mapping=every),
                        *(AssetDep(s.key("results"), partition_mapping=every) for s in suites),
                    ],
                    description="Per judge identity (provider, model, evaluator, definition or rubric hash, prompt "
                    "version; one partition each): agreement with the stored human labels over the latest results, "
                    "Cohen's kappa with its 95% interval, true positive and negative rates, the confusion matrix, "
                    "disagreements and a row per claim; stored, so the next run's calibration gate reads it.",
                )
            ],
            check_specs=[check],
            partitions_def=judge_identities,
            can_subset=False,
            backfill_policy=BackfillPolicy.single_run(),
            required_resource_keys={ns.resource_key},
            description="Calibrate the judge identities of the run against the stored human labels.",
        )
        def calibration(
            context: AssetExecutionContext,
        ) -> Iterator[AssetCheckEvaluation | MaterializeResult[Any] | Output[None]]:
            agent_health: AgentHealthResource = ns.resource(context)
            project = agent_health.project()
            found = calibrate_identities(project.store, context.partition_keys, project.config.judge.calibration)
            for key, judged in found.items():
                context.add_asset_metadata(_metadata(judged.metadata()), asset_key=calibration_key, partition_key=key)
                # evaluated in the materializing run, on the identity's partition (a runless
                # evaluation of a partitioned check can be stored once per partition only)
                yield from gate_evaluations(calibration_key, key, [judged.gate_result()])
            yield MaterializeResult(asset_key=calibration_key)
            yield Output(None, output_name=check.get_python_identifier())  # its evaluations were logged above

    return [labels_spec(ns), calibration]


def _digest(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


REASON = "labelled verdicts changed"
NO_LABELS = LabelledJudges(0, 0, ()).digest  # a store without labels has nothing to observe


def sync_judge_identities(
    instance: Any, project: Project, cursor: Mapping[str, Any], ns: Namespace = DEFAULT
) -> SensorResult:
    """The calibration sensor's work as a function: add a partition for each judge identity whose
    labelled verdicts first appear in the store, request one calibration run per contiguous block
    of identities whose labelled verdicts changed since the cursor (`judges`: key -> digest), and
    observe the labels when they changed (`labels`: their digest)."""
    found = labelled_judges(project.store)
    registered = list(instance.get_dynamic_partitions(ns.judge_identities))
    add = [j.key for j in found.judges if j.key not in registered]
    seen: dict[str, str] = dict(cursor.get("judges", {}))
    now = {j.key: j.digest for j in found.judges}
    changed = [key for key, digest in now.items() if seen.get(key) != digest]
    runs = [
        RunRequest(
            # a change from one digest to another: a label reverted later is a new change
            run_key=f"calibrate:{block[0]}:{_digest([(k, seen.get(k), now[k]) for k in block])}",
            job_name=ns.calibrate_job,
            tags={
                RANGE_START_TAG: block[0],
                RANGE_END_TAG: block[-1],
                "agent_health/reason": "labelled verdicts changed",
            },
        )
        for block in contiguous_blocks(ordered_after(registered, add, ()), changed)
    ]
    events: list[Any] = []
    if cursor.get("labels", NO_LABELS) != found.digest:
        events.append(AssetObservation(ns.labels_key, metadata=found.numbers(), tags={DATA_VERSION_TAG: found.digest}))
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=[AddDynamicPartitionsRequest(ns.judge_identities, add)] if add else [],
        asset_events=events,
        cursor=json.dumps({"labels": found.digest, "judges": {**seen, **now}}, sort_keys=True),
    )


def build_calibration_sensor(job: Any, interval: int, ns: Namespace = DEFAULT) -> Any:
    """`calibration_sensor`: keeps the judge identities in step with the stored labels and verdicts."""

    @sensor(
        name=ns.name("calibration_sensor"),
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        job=job,
        required_resource_keys={ns.resource_key},
        description="Adds a judge identity's partition of judges/calibration when its first labelled verdict is "
        "stored, and calibrates the identities whose labels or labelled verdicts changed. Reads the stored labels, "
        "then only the results of labelled tests.",
    )
    def calibration_sensor(context: SensorEvaluationContext, **_called: Any) -> SensorResult:
        agent_health: AgentHealthResource = ns.resource(context)
        return sync_judge_identities(context.instance, agent_health.project(), json.loads(context.cursor or "{}"), ns)

    return calibration_sensor


__all__ = ["GROUP", "LABELS", "build_calibration_assets", "build_calibration_sensor", "sync_judge_identities"]
