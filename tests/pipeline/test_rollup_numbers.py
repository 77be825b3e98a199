"""What a suite's rollup shows in Dagster comes from `SuiteRollup.metrics()`: a figure added there is
shown without touching the pipeline, under its shown name and with readable precision."""

from __future__ import annotations

from agent_health.analysis.rollup import rollup
from agent_health.pipeline.version import SuiteVersion
from tests.reports.helpers import result


def version_of(results) -> SuiteVersion:
    ru = rollup(results, "s", "demo@v1")
    return SuiteVersion(
        suite="s",
        agent="demo@v1",
        tests=len(results),
        missing=["s::gone"],
        rollup=ru,
        metrics=[],
        failures={},
        baseline=None,
        comparison=None,
    )


def test_every_rollup_figure_is_shown_under_its_name():
    results = [
        result("a", duration_ms=120.4, score=1.0),
        result("b", "failed", duration_ms=80.2, score=0.2),
        result("c", "errored", duration_ms=10.0),
    ]
    sv = version_of(results)
    shown = sv.rollup_numbers()
    renamed = {"pass_rate": "pass_rate_pct", "errored_share": "errored_pct"}
    assert {renamed.get(k, k) for k in sv.rollup.metrics()} | {"missing_results"} == set(shown)
    assert shown["total"] == 3 and shown["passed"] == 1 and shown["failed"] == 1 and shown["errored"] == 1
    assert shown["pass_rate_pct"] == 50.0  # passed / (passed + failed), in percent
    assert round(shown["errored_pct"], 1) == 33.3
    assert shown["missing_results"] == 1


def test_a_figure_added_to_the_rollup_is_shown(monkeypatch):
    sv = version_of([result("a")])
    plain = type(sv.rollup).metrics
    monkeypatch.setattr(type(sv.rollup), "metrics", lambda self: {**plain(self), "new_figure": 0.123456})
    assert sv.rollup_numbers()["new_figure"] == 0.1235
