"""Gates over a suite rollup: pass rate, errored share, and no regression against a baseline.

A gate never passes on missing evidence. Where the current (registered) tests are known, a test
without a stored result on the version (or, for `no_regression`, on its baseline) keeps every
gate from passing: it fails, or fails as a warning (`Thresholds.missing_evidence`, the deployment
setting AGENT_HEALTH_MISSING_EVIDENCE), and says how many and which in the same words and the same
metadata keys whichever gate it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_health.analysis.compare import Comparison
from agent_health.analysis.rollup import SuiteRollup
from agent_health.config.deployment import MissingEvidence

Severity = Literal["error", "warn"]
SHOWN_IDS = 5  # test ids a gate's description names
LISTED_IDS = 50  # test ids a gate's metadata lists (with the whole count beside them)


class Thresholds(BaseModel):
    """Limits the rollup checks enforce."""

    model_config = ConfigDict(frozen=True)

    min_pass_rate: float = Field(0.5, ge=0, le=1, description="Pass rate every suite must reach.")
    suite_min_pass_rate: dict[str, float] = Field(
        default_factory=dict, description="Per-suite pass-rate thresholds (suite -> 0..1)."
    )
    max_errored_share: float = Field(0.1, ge=0, le=1, description="Largest share of errored tests allowed.")
    missing_evidence: MissingEvidence = Field(
        "fail",
        description="A gate whose evidence is incomplete (current tests without a result on the version or its "
        "baseline): `fail` (severity error) or `warn` (fails with severity warn). A gate whose evidence fails it "
        "anyway is an error either way.",
    )

    def pass_rate_for(self, suite: str) -> float:
        return self.suite_min_pass_rate.get(suite, self.min_pass_rate)


class Gate(BaseModel):
    """One check outcome with the evidence a reader needs. `severity` says how a gate that did not
    pass counts: `error` (a failure) or `warn` (shown as a warning: out-of-date results, or missing
    evidence under AGENT_HEALTH_MISSING_EVIDENCE=warn). A passed gate has severity error."""

    model_config = ConfigDict(frozen=True)

    name: str
    passed: bool
    description: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    severity: Severity = "error"

    @property
    def warn(self) -> bool:
        """Did not pass, as a warning only."""
        return not self.passed and self.severity == "warn"


def id_list(ids: Sequence[str], shown: int = SHOWN_IDS) -> str:
    """The first `shown` ids and how many more: 'a, b, c and 271 more'."""
    head = ", ".join(ids[:shown])
    return f"{head} and {len(ids) - shown} more" if len(ids) > shown else head


def missing_sentence(missing: Sequence[str], current: int, who: str) -> str:
    """How much evidence is missing, in the words every gate uses: '274 of 500 current test(s) have
    no stored result for baseline demo@v1: a, b, c, d, e and 269 more'."""
    return f"{len(missing)} of {current} current test(s) have no stored result for {who}: {id_list(missing)}"


def missing_metadata(missing: Sequence[str], prefix: str = "") -> dict[str, Any]:
    """`<prefix>missing_results` (the count) and `<prefix>missing` (the first LISTED_IDS ids)."""
    return {f"{prefix}missing_results": len(missing), f"{prefix}missing": list(missing[:LISTED_IDS])}


def _severity(evidence_fails: bool, incomplete: bool, policy: MissingEvidence) -> Severity:
    """error when what is there fails the gate, else as the missing-evidence setting says."""
    return "warn" if incomplete and not evidence_fails and policy == "warn" else "error"


def rollup_gates(
    rollup: SuiteRollup,
    thresholds: Thresholds,
    comparison: Comparison | None = None,
    missing: Sequence[str] = (),
    uncalibrated: Mapping[str, int] | None = None,
    calibrated: Mapping[str, int] | None = None,
    *,
    baseline: str | None = None,
    baseline_missing: Sequence[str] = (),
) -> list[Gate]:
    """pass_rate_threshold, errored_share_threshold and no_regression, in that order.

    `missing`: current tests without a stored result on the version; `baseline_missing`: current
    tests without one on `baseline` (default: the comparison's). Missing evidence keeps each gate
    from passing (the version's for all three, the baseline's for no_regression): the gate fails
    with severity error, or warn under `thresholds.missing_evidence == "warn"` when what is there
    would pass it; its description names how many and the first ids, its metadata holds
    `missing_results` / `missing` (and `baseline_missing_results` / `baseline_missing`) and
    `current_tests`. `uncalibrated` ('<judge>: <why>' -> tests) names the judges whose verdicts
    did not gate (judge.calibration): the pass-rate check says so, since its rate left them out;
    `calibrated` (judge -> tests) the judges that met the gate, said too."""
    policy = thresholds.missing_evidence
    current = rollup.total + len(missing)
    where = f"for {rollup.suite} @ {rollup.agent}"
    gap = missing_sentence(missing, current, f"{rollup.suite} @ {rollup.agent}") if missing else ""
    evidence = {"current_tests": current, **missing_metadata(missing)}

    need = thresholds.pass_rate_for(rollup.suite)
    rate = rollup.pass_rate
    rate_ok = rate is not None and rate >= need
    over = f" over the {rollup.total} with one" if missing else ""
    said = (f"pass rate {rate:.1%}{over} " if rate is not None else "no gradable tests ") + f"(threshold {need:.1%})"
    rate_gate = Gate(
        name="pass_rate_threshold",
        passed=rate_ok and not missing,
        description=f"{gap}; run them first. {said}" if missing else f"{said} {where}",
        metadata={"pass_rate": rate, "threshold": need, "failing": rollup.failing[:LISTED_IDS], **evidence},
        severity=_severity(not rate_ok, bool(missing), policy),
    )
    if uncalibrated:
        judges = "; ".join(f"judge {who} ({n} test(s))" for who, n in sorted(uncalibrated.items()))
        rate_gate = rate_gate.model_copy(
            update={
                "description": f"{rate_gate.description}. Not calibrated, its verdicts only observed: {judges}",
                "metadata": {**rate_gate.metadata, "uncalibrated_judges": sorted(uncalibrated)},
            }
        )
    if calibrated:
        judges = "; ".join(f"{who} ({n} test(s))" for who, n in sorted(calibrated.items()))
        rate_gate = rate_gate.model_copy(
            update={
                "description": f"{rate_gate.description}. Calibrated judges (judge.calibration): {judges}",
                "metadata": {**rate_gate.metadata, "calibrated_judges": sorted(calibrated)},
            }
        )

    share_ok = rollup.errored_share <= thresholds.max_errored_share
    share = (
        f"{rollup.errored} of {rollup.total} tests{' with a result' if missing else ''} errored "
        f"({rollup.errored_share:.1%}; at most {thresholds.max_errored_share:.1%})"
    )
    errored_gate = Gate(
        name="errored_share_threshold",
        passed=share_ok and not missing,
        description=f"{gap}; run them first. {share}" if missing else share,
        metadata={
            "errored_share": rollup.errored_share,
            "threshold": thresholds.max_errored_share,
            "errored": [e.test_id for e in rollup.errored_tests][:LISTED_IDS],
            **evidence,
        },
        severity=_severity(not share_ok, bool(missing), policy),
    )
    if baseline is None and comparison is not None:
        baseline = comparison.baseline
    return [rate_gate, errored_gate, regression_gate(rollup, policy, comparison, missing, baseline, baseline_missing)]


def regression_gate(
    rollup: SuiteRollup,
    policy: MissingEvidence,
    comparison: Comparison | None,
    missing: Sequence[str],
    baseline: str | None,
    baseline_missing: Sequence[str],
) -> Gate:
    """no_regression: no test that passed on the baseline fails or errors now, over the whole of
    both sides. Passes with no baseline (an agent's first version)."""
    if baseline is None:
        return Gate(name="no_regression", passed=True, description=f"no baseline to compare {rollup.agent} against")
    current = rollup.total + len(missing)
    flipped = comparison.regressed_tests if comparison is not None else []
    gaps = [
        missing_sentence(ids, current, who)
        for ids, who in ((baseline_missing, f"baseline {baseline}"), (missing, rollup.agent))
        if ids
    ]
    compared = current - len(set(missing) | set(baseline_missing))
    if flipped:
        # fewer ids beside the gaps: every count stays within the first 1000 characters a UI shows
        head = f"{len(flipped)} test(s) regressed against {baseline}: {id_list(flipped, 5 if gaps else 10)}"
        description = "; ".join([head, *gaps])
    elif gaps:
        description = (
            f"not compared in full: {'; '.join(gaps)}. No test regressed against {baseline} over the {compared} "
            "test(s) both have a result for; run the missing ones to compare the whole suite"
        )
    else:
        description = f"no test regressed against {baseline} (all {current} current test(s) compared)"
    return Gate(
        name="no_regression",
        passed=not flipped and not gaps,
        description=description,
        metadata={
            "baseline": baseline,
            "regressed": flipped[:100],
            "fixed": [t.test_id for t in comparison.fixes][:100] if comparison is not None else [],
            "pass_rate_delta": comparison.pass_rate_delta if comparison is not None else None,
            "current_tests": current,
            "compared_tests": compared,
            **missing_metadata(missing),
            **missing_metadata(baseline_missing, "baseline_"),
        },
        severity=_severity(bool(flipped), bool(gaps), policy),
    )
