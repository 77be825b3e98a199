"""A gate never passes on missing evidence (issue 31): with the suite's current tests known, a
version or a baseline without a stored result for some of them keeps the rollup's gates from
passing, and each gate says how many and which, in the same words and metadata keys. Read from a
real local result store, as the Dagster rollup reads it."""

from __future__ import annotations

import pytest

from agent_health.config import deployment_settings
from agent_health.errors import ConfigError
from agent_health.pipeline import Gate, Thresholds, summarize_version
from agent_health.stores import LocalResultStore
from tests.reports.helpers import result

SUITE = "s"
REGISTERED = ["a@v1", "a@v2"]


def ids(n: int) -> list[str]:
    return [f"{SUITE}::t{i:03d}" for i in range(n)]


def store_of(tmp_path, **versions: list[tuple[int, str]]) -> LocalResultStore:
    """A local store holding, per version (`a_v1=...`), results of tests by index and status."""
    store = LocalResultStore(tmp_path / "results")
    for key, rows in versions.items():
        agent = key.replace("_", "@")
        store.put_many(  # as one run writes them: one fsync per batch
            result(f"t{i:03d}", status, agent=agent, suite=SUITE, score=float(status == "passed"), eval_run_id="r1")
            for i, status in rows
        )
    return store


def gates(store, agent: str, tests: list[str], thresholds: Thresholds | None = None) -> dict[str, Gate]:
    sv = summarize_version(store, SUITE, agent, tests, REGISTERED, thresholds or Thresholds())
    return {g.name: g for g in sv.gates}


def passing(n: int, start: int = 0) -> list[tuple[int, str]]:
    return [(i, "passed") for i in range(start, n)]


def test_no_regression_fails_naming_the_baseline_tests_without_a_result(tmp_path):
    # a killed baseline run: 66 of 120 current tests have no baseline result; the candidate ran them all
    tests = ids(120)
    store = store_of(tmp_path, a_v1=passing(54), a_v2=passing(120))
    g = gates(store, "a@v2", tests)["no_regression"]
    assert not g.passed and g.severity == "error" and not g.warn
    assert g.description.startswith("not compared in full: 66 of 120 current test(s) have no stored result for ")
    assert "baseline a@v1: s::t054, s::t055, s::t056, s::t057, s::t058 and 61 more" in g.description
    assert "over the 54 test(s) both have a result for" in g.description
    meta = g.metadata
    assert meta["baseline_missing_results"] == 66 and meta["baseline_missing"] == tests[54:104]  # the first 50
    assert (meta["missing_results"], meta["current_tests"], meta["compared_tests"]) == (0, 120, 54)
    # the candidate's own gates have their whole evidence and pass
    sv = summarize_version(store, SUITE, "a@v2", tests, REGISTERED, Thresholds())
    assert [x.passed for x in sv.gates[:2]] == [True, True]
    assert sv.baseline_missing == tests[54:] and sv.rollup_numbers()["baseline_missing_results"] == 66
    assert [r["test_id"] for r in sv.tables()["baseline_missing"].rows] == tests[54:]


def test_a_baseline_without_any_result_for_the_suite_is_missing_evidence_too(tmp_path):
    tests = ids(3)
    store = store_of(tmp_path, a_v2=passing(3))
    g = gates(store, "a@v2", tests)["no_regression"]
    assert not g.passed and "3 of 3 current test(s) have no stored result for baseline a@v1" in g.description
    # an agent's first version has no baseline to lack: nothing to compare, the gate passes
    first = gates(store_of(tmp_path / "first", a_v1=passing(3)), "a@v1", tests)["no_regression"]
    assert first.passed and first.description == "no baseline to compare a@v1 against"


def test_every_gate_names_the_candidate_tests_without_a_result_alike(tmp_path):
    tests = ids(10)
    store = store_of(tmp_path, a_v1=passing(10), a_v2=passing(8))
    by = gates(store, "a@v2", tests)
    said = "2 of 10 current test(s) have no stored result for "
    for name in ("pass_rate_threshold", "errored_share_threshold", "no_regression"):
        g = by[name]
        assert not g.passed and g.severity == "error", name
        assert said in g.description and "s::t008, s::t009" in g.description, name
        assert (g.metadata["missing_results"], g.metadata["missing"], g.metadata["current_tests"]) == (
            2,
            ["s::t008", "s::t009"],
            10,
        ), name
    assert by["pass_rate_threshold"].description.startswith(f"{said}s @ a@v2: s::t008, s::t009; run them first.")
    assert "pass rate 100.0% over the 8 with one" in by["pass_rate_threshold"].description
    assert "0 of 8 tests with a result errored" in by["errored_share_threshold"].description
    assert f"{said}a@v2: s::t008, s::t009" in by["no_regression"].description


def test_the_setting_makes_missing_evidence_a_warning_but_never_hides_a_failure(tmp_path):
    assert deployment_settings({"AGENT_HEALTH_MISSING_EVIDENCE": "warn"}).missing_evidence == "warn"
    assert deployment_settings({}).missing_evidence == "fail"
    with pytest.raises(ConfigError, match=r"^\$AGENT_HEALTH_MISSING_EVIDENCE: expected one of fail, warn, got 'skip'$"):
        deployment_settings({"AGENT_HEALTH_MISSING_EVIDENCE": "skip"})
    warn = Thresholds(missing_evidence=deployment_settings({"AGENT_HEALTH_MISSING_EVIDENCE": "warn"}).missing_evidence)
    tests = ids(10)
    partial = store_of(tmp_path / "partial", a_v1=passing(4), a_v2=passing(9))
    by = gates(partial, "a@v2", tests, warn)
    for g in by.values():
        assert not g.passed and g.severity == "warn" and g.warn, g.name
    assert "6 of 10 current test(s) have no stored result for baseline a@v1" in by["no_regression"].description
    # what is there fails the gate: an error whatever the setting (a regression; a pass rate under its threshold)
    worse = store_of(tmp_path / "worse", a_v1=passing(4), a_v2=[(0, "failed"), (1, "failed"), *passing(9, 2)])
    by = gates(worse, "a@v2", tests, Thresholds(missing_evidence="warn", min_pass_rate=0.9))
    assert by["no_regression"].severity == "error" and not by["no_regression"].passed
    assert by["no_regression"].description.startswith("2 test(s) regressed against a@v1: s::t000, s::t001; 6 of 10")
    assert by["pass_rate_threshold"].severity == "error"
    assert by["errored_share_threshold"].severity == "warn"  # no test errored: only its evidence is short


def test_the_gates_pass_when_the_evidence_is_whole(tmp_path):
    tests = ids(10)
    store = store_of(tmp_path, a_v1=passing(10), a_v2=passing(10))
    by = gates(store, "a@v2", tests)
    assert all(g.passed and g.severity == "error" for g in by.values())
    assert by["no_regression"].description == "no test regressed against a@v1 (all 10 current test(s) compared)"
    assert by["no_regression"].metadata["baseline_missing_results"] == 0
    assert by["pass_rate_threshold"].description == "pass rate 100.0% (threshold 50.0%) for s @ a@v2"


def test_the_documented_message_is_what_the_gate_says(tmp_path):
    """docs/dagster.md's example: a killed baseline run left 274 of 500 results missing."""
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "dagster.md").read_text()
    documented = " ".join(text.split("```text\nnot compared in full:", 1)[1].split("```", 1)[0].split())
    store = LocalResultStore(tmp_path / "results")
    tests = [f"rca::t{i:03d}" for i in range(500)]
    for agent, n in (("demo@v1", 226), ("demo@v2", 500)):
        store.put_many(result(f"t{i:03d}", agent=agent, suite="rca", eval_run_id="r1") for i in range(n))
    sv = summarize_version(store, "rca", "demo@v2", tests, ["demo@v1", "demo@v2"], Thresholds())
    [gate] = [g for g in sv.gates if g.name == "no_regression"]
    assert gate.description == f"not compared in full: {documented}"
