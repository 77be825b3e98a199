"""The leaderboard and the version comparison say how much evidence they stand on (issue 31): a
version that ran part of the current tests is marked with how many it misses, per suite and in
its total, and a comparison table cut at its row limit says so, most important rows first. Read
from a real local result store, as the Dagster benchmark assets read it."""

from __future__ import annotations

import json

from agent_health.pipeline import build_leaderboard, compare_version
from agent_health.stores import LocalResultStore
from tests.reports.helpers import result


def put(store: LocalResultStore, agent: str, suite: str, statuses: dict[int, str]) -> None:
    store.put_many(result(f"t{i:02d}", s, agent=agent, suite=suite, eval_run_id="r1") for i, s in statuses.items())


def suite_ids(suite: str, n: int) -> list[str]:
    return [f"{suite}::t{i:02d}" for i in range(n)]


def test_the_leaderboard_marks_a_version_with_missing_results(tmp_path):
    store = LocalResultStore(tmp_path / "results")
    suites = {"big": suite_ids("big", 20), "small": suite_ids("small", 3)}
    put(store, "demo@v2", "big", dict.fromkeys(range(20), "passed"))
    put(store, "demo@v2", "small", {0: "passed", 1: "passed", 2: "failed"})
    put(store, "demo@v3", "small", dict.fromkeys(range(3), "passed"))  # v3 ran the small suite only
    view = build_leaderboard(store, suites, ["demo@v2", "demo@v3"], ["demo@v2", "demo@v3"])
    totals = {r.agent: r for r in view.board.totals}
    assert (totals["demo@v3"].total, totals["demo@v3"].current_tests, totals["demo@v3"].missing) == (3, 23, 20)
    assert (totals["demo@v2"].total, totals["demo@v2"].missing) == (23, 0)
    rows = view.table().rows
    v3_total = next(r for r in rows if r["agent"].startswith("demo@v3") and r["suite"] == "*")
    assert v3_total["agent"] == "demo@v3 (20 of 23 missing)"  # the marker where the version is named
    assert (v3_total["passed"], v3_total["current_tests"], v3_total["missing"], v3_total["coverage_pct"]) == (
        3,
        23,
        20,
        13.0,
    )
    assert v3_total["pass_rate_pct"] == 100.0  # its figures, over what it ran, beside the marker
    # per suite: the suite v3 never ran has a row of none, marked; the one it ran in full is not
    v3_big = next(r for r in rows if r["agent"].startswith("demo@v3") and r["suite"] == "big")
    assert (v3_big["agent"], v3_big["passed"], v3_big["coverage_pct"], v3_big["pass_rate_pct"]) == (
        "demo@v3 (20 of 20 missing)",
        0,
        0.0,
        None,
    )
    assert next(r for r in rows if r["suite"] == "small" and r["agent"].startswith("demo@v3"))["agent"] == "demo@v3"
    assert {r["agent"] for r in rows if r["agent"].startswith("demo@v2")} == {"demo@v2"}  # whole: unmarked
    numbers = view.numbers()
    assert numbers["incomplete"] == "demo@v3 (20 of 23 missing)"
    assert (numbers["missing_results demo@v3"], numbers["coverage_pct demo@v3"]) == (20, 13.0)
    assert (numbers["missing_results demo@v2"], numbers["coverage_pct demo@v2"]) == (0, 100.0)
    assert "demo@v3 (20 of 23 missing) | * | 3 of 23 |" in view.board.to_markdown()
    # the JSON the leaderboard asset writes holds the counts too
    saved = json.loads(json.dumps(view.board.model_dump(), default=str))
    assert {(r["agent"], r["missing"], r["current_tests"]) for r in saved["totals"]} == {
        ("demo@v2", 0, 23),
        ("demo@v3", 20, 23),
    }


def test_a_cut_comparison_table_says_so_and_shows_the_important_rows_first(tmp_path):
    store = LocalResultStore(tmp_path / "results")
    tests = {"s": suite_ids("s", 12)}
    # baseline: t00-t09 (t10, t11 never ran); candidate: all but t09
    put(store, "a@v1", "s", {i: "failed" if i == 4 else "errored" if i == 5 else "passed" for i in range(10)})
    cand = dict.fromkeys(range(12), "passed")
    cand |= {0: "failed", 1: "errored", 5: "errored"}  # t00 regressed, t01 newly errored, t05 still errored
    del cand[9]  # no candidate result: removed
    put(store, "a@v2", "s", cand)
    view = compare_version(store, tests, ["a@v1", "a@v2"], "a@v2", state=tmp_path / "state")
    report = tmp_path / "state" / "benchmark" / "comparison-a_v2.json"
    assert view.report == str(report) and len(json.loads(report.read_text())["tests"]) == 12
    table = view.tables(limit=7)["comparison"]
    shown = [(r["test_id"], r["flip"]) for r in table.rows]
    assert shown[:7] == [
        ("s::t00", "regressed"),
        ("s::t01", "newly_errored"),
        ("s::t05", "same"),  # errored on both sides
        ("s::t09", "removed"),  # no candidate result
        ("s::t10", "added"),  # no baseline result
        ("s::t11", "added"),
        ("s::t04", "fixed"),
    ]
    assert shown[7] == (
        f"7 of 12 rows shown (regressions, errors and missing results first); the other 5 in {report}",
        "not shown",
    )
    assert len(table.rows) == 8
    numbers = view.numbers(limit=7)
    assert numbers["comparison_rows"] == shown[7][0]
    assert (numbers["current_tests"], numbers["baseline_missing_results"], numbers["candidate_missing_results"]) == (
        12,
        2,
        1,
    )
    assert (
        numbers["coverage"] == "partial: 9 of 12 current test(s) compared; 2 have no result on the baseline a@v1, "
        "1 has no result on a@v2"
    )
    assert [r["test_id"] for r in view.tables()["baseline_missing"].rows] == ["s::t10", "s::t11"]
    assert [r["test_id"] for r in view.tables()["candidate_missing"].rows] == ["s::t09"]
    # under the limit: every row, no note row
    whole = view.tables()["comparison"]
    assert len(whole.rows) == 12 and all(r["flip"] != "not shown" for r in whole.rows)
    assert view.numbers()["comparison_rows"] == "all 12 rows shown"
