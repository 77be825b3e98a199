"""Gates over a suite rollup: pass rate, errored share, and no regression against a baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_health.analysis.compare import Comparison
from agent_health.analysis.rollup import SuiteRollup


class Thresholds(BaseModel):
    """Limits the rollup checks enforce."""

    model_config = ConfigDict(frozen=True)

    min_pass_rate: float = Field(0.5, ge=0, le=1, description="Pass rate every suite must reach.")
    suite_min_pass_rate: dict[str, float] = Field(
        default_factory=dict, description="Per-suite pass-rate thresholds (suite -> 0..1)."
    )
    max_errored_share: float = Field(0.1, ge=0, le=1, description="Largest share of errored tests allowed.")

    def pass_rate_for(self, suite: str) -> float:
        return self.suite_min_pass_rate.get(suite, self.min_pass_rate)


class Gate(BaseModel):
    """One check outcome with the evidence a reader needs."""

    model_config = ConfigDict(frozen=True)

    name: str
    passed: bool
    description: str
    metadata: dict[str, Any] = Field(default_factory=dict)


def rollup_gates(
    rollup: SuiteRollup,
    thresholds: Thresholds,
    comparison: Comparison | None = None,
    missing: Sequence[str] = (),
    uncalibrated: Mapping[str, int] | None = None,
    calibrated: Mapping[str, int] | None = None,
) -> list[Gate]:
    """pass_rate_threshold, errored_share_threshold and no_regression, in that order. Current
    tests without a stored result (`missing`) fail the pass-rate gate: a rollup over part of the
    suite is not a pass. `uncalibrated` ('<judge>: <why>' -> tests) names the judges whose verdicts
    did not gate (judge.calibration): the pass-rate check says so, since its rate left them out;
    `calibrated` (judge -> tests) the judges that met the gate, said too."""
    need = thresholds.pass_rate_for(rollup.suite)
    rate = rollup.pass_rate
    where = f"for {rollup.suite} @ {rollup.agent}"
    if missing:
        rate_gate = Gate(
            name="pass_rate_threshold",
            passed=False,
            description=f"{len(missing)} of {rollup.total + len(missing)} current test(s) have no stored result "
            f"{where}: " + ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "") + "; run them first",
            metadata={"pass_rate": rate, "threshold": need, "missing": list(missing[:50])},
        )
    else:
        rate_gate = Gate(
            name="pass_rate_threshold",
            passed=rate is not None and rate >= need,
            description=(f"pass rate {rate:.1%} " if rate is not None else "no gradable tests ")
            + f"(threshold {need:.1%}) {where}",
            metadata={"pass_rate": rate, "threshold": need, "failing": rollup.failing[:50]},
        )
    if uncalibrated:
        said = "; ".join(f"judge {who} ({n} test(s))" for who, n in sorted(uncalibrated.items()))
        rate_gate = rate_gate.model_copy(
            update={
                "description": f"{rate_gate.description}. Not calibrated, its verdicts only observed: {said}",
                "metadata": {**rate_gate.metadata, "uncalibrated_judges": sorted(uncalibrated)},
            }
        )
    if calibrated:
        said = "; ".join(f"{who} ({n} test(s))" for who, n in sorted(calibrated.items()))
        rate_gate = rate_gate.model_copy(
            update={
                "description": f"{rate_gate.description}. Calibrated judges (judge.calibration): {said}",
                "metadata": {**rate_gate.metadata, "calibrated_judges": sorted(calibrated)},
            }
        )
    gates = [
        rate_gate,
        Gate(
            name="errored_share_threshold",
            passed=rollup.errored_share <= thresholds.max_errored_share,
            description=f"{rollup.errored} of {rollup.total} tests errored ({rollup.errored_share:.1%}; "
            f"at most {thresholds.max_errored_share:.1%})",
            metadata={
                "errored_share": rollup.errored_share,
                "threshold": thresholds.max_errored_share,
                "errored": [e.test_id for e in rollup.errored_tests][:50],
            },
        ),
    ]
    if comparison is None:
        gates.append(
            Gate(name="no_regression", passed=True, description=f"no baseline to compare {rollup.agent} against")
        )
    else:
        flipped = [t.test_id for t in comparison.regressions]
        gates.append(
            Gate(
                name="no_regression",
                passed=not flipped,
                description=(
                    f"{len(flipped)} test(s) regressed against {comparison.baseline}: " + ", ".join(flipped[:10])
                    if flipped
                    else f"no test regressed against {comparison.baseline}"
                ),
                metadata={
                    "baseline": comparison.baseline,
                    "regressed": flipped[:100],
                    "fixed": [t.test_id for t in comparison.fixes][:100],
                    "pass_rate_delta": comparison.pass_rate_delta,
                },
            )
        )
    return gates
