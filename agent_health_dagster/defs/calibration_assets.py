"""Judge calibration: the human labels (stored beside the results by `agent-health calibrate` or
the HTML report) and, downstream of them and of every suite's results, the calibration of each
judge identity with its `judges_calibrated` check. The library computes it
(agent_health.pipeline.calibration); this maps it to metadata."""

from collections.abc import Sequence
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetSpec,
    MaterializeResult,
    asset,
)

from agent_health.pipeline import JUDGES_CALIBRATED, calibrate_judges
from agent_health_dagster.defs.names import CALIBRATION_KEY, LABELS_KEY
from agent_health_dagster.defs.resources import AgentHealthResource
from agent_health_dagster.defs.suite_assets import OWNERS, SuiteAssets, clean
from agent_health_dagster.defs.tables import table_value

GROUP = "judges"

LABELS = AssetSpec(
    key=LABELS_KEY,
    group_name=GROUP,
    owners=OWNERS,
    kinds={"python"},
    description="Human labels of judge verdicts (pass/fail per test, agent version or run, and claim), stored "
    "beside the results by `agent-health calibrate --labels FILE` (docs/judges.md).",
)


def build_calibration_assets(suites: Sequence[SuiteAssets]) -> list[Any]:
    @asset(
        key=CALIBRATION_KEY,
        group_name=GROUP,
        owners=OWNERS,
        kinds={"python", "table"},
        tags={"agent_health/layer": "judges"},
        deps=[LABELS_KEY, *(s.key("results") for s in suites)],
        check_specs=[
            AssetCheckSpec(
                JUDGES_CALIBRATED,
                asset=CALIBRATION_KEY,
                description="Every labelled judge identity meets judge.calibration (min_kappa, min_labels); a "
                "gating judge that does not only observes.",
            )
        ],
        description="Per judge identity (provider, model, evaluator, definition, prompt version) and criterion: "
        "agreement with the stored human labels over the latest results, Cohen's kappa with its 95% interval, "
        "true positive and negative rates; stored, so the next run's calibration gate reads it.",
    )
    def calibration(context: AssetExecutionContext, agent_health: AgentHealthResource) -> MaterializeResult:  # type: ignore[type-arg]  # Dagster rejects MaterializeResult[Any] on an asset with checks
        project = agent_health.project()
        view = calibrate_judges(project.store, project.config.judge.calibration)
        gate = view.gate_result()
        return MaterializeResult(
            metadata=clean({"calibration": table_value(view.table()), **view.numbers()}),
            check_results=[
                AssetCheckResult(
                    check_name=gate.name,
                    passed=gate.passed,
                    description=gate.description[:1000],
                    metadata=clean(gate.metadata),
                )
            ],
        )

    return [LABELS, calibration]


__all__ = ["GROUP", "LABELS", "build_calibration_assets"]
