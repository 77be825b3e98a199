"""`agent-health calibrate` as a user runs it: a real judge server disagrees with the human labels
on known cases, and the kappa, rates and confusion matrix are the ones computed by hand."""

from __future__ import annotations

import json
import math

import pytest

from agent_health.model.calibration import judge_key
from agent_health.stores import LocalResultStore
from tests.support.cli import cli_in_process

from .conftest import case_id

# Human labels: cases 0-5 pass, 6-11 fail. The judge passes 0-4 and 6-7: it misses case 5 (a
# false negative) and lets 6 and 7 through (false positives).
HUMAN_PASS = set(range(6))
JUDGE_PASS = {0, 1, 2, 3, 4, 6, 7}


def labels(project, **extra):
    rows = [
        {
            "test_id": case_id(i),
            "agent": "sre@v1",
            "criterion": "identifies the database as the cause",
            "label": "pass" if i in HUMAN_PASS else "fail",
            "note": f"human on case {i}",
            "labeller": "ana",
        }
        for i in range(12)
    ]
    rows.append({"test_id": "cases::no-such-case", "agent": "sre@v1", "label": "pass"})  # matches nothing
    return project.write_labels(rows, **extra)


def run(project, *args):
    p = cli_in_process("run", "evals", "--agent", "sre@v1", *args, cwd=project.root)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def calibrate(project, *args, expect=0):
    p = cli_in_process("calibrate", *args, cwd=project.root)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == expect, p.stdout + p.stderr
    return p


def hand_kappa_interval(m):
    """Cohen's kappa and its 95% interval by hand: the asymptotic variance of Fleiss, Cohen and
    Everitt (1969), from the 2x2 table rows human (pass, fail), columns judge (pass, fail)."""
    n = sum(sum(r) for r in m)
    p = [[c / n for c in r] for r in m]
    row = [sum(r) for r in p]  # human marginals
    col = [p[0][j] + p[1][j] for j in range(2)]  # judge marginals
    po = p[0][0] + p[1][1]
    pe = row[0] * col[0] + row[1] * col[1]
    k = (po - pe) / (1 - pe)
    a = sum(p[i][i] * (1 - (row[i] + col[i]) * (1 - k)) ** 2 for i in range(2))
    b = (1 - k) ** 2 * sum(p[i][j] * (col[i] + row[j]) ** 2 for i in range(2) for j in range(2) if i != j)
    c = (k - pe * (1 - k)) ** 2
    se = math.sqrt((a + b - c) / ((1 - pe) ** 2 * n))
    return k, k - 1.959964 * se, k + 1.959964 * se


def test_calibrate_gives_the_hand_computed_kappa_rates_and_disagreements(calib_project):
    project = calib_project
    project.judge.passes = JUDGE_PASS
    assert run(project).returncode == 1  # the judge failed some cases
    path = labels(project)

    p = calibrate(project, "--labels", str(path), "--json")
    report = json.loads(p.stdout)
    (cal,) = report["calibrations"]  # one judge, one claim: no per-criterion row
    assert cal["judge"]["provider"] == "openai" and cal["judge"]["model"] == "judge-a"
    assert cal["n"] == 12
    assert cal["confusion"] == {"tp": 5, "fp": 2, "fn": 1, "tn": 4}
    assert cal["agreement"] == pytest.approx(9 / 12)
    # po = 0.75; pe = (6*7 + 6*5) / 144 = 0.5; kappa = (0.75 - 0.5) / (1 - 0.5) = 0.5
    assert cal["kappa"] == pytest.approx(0.5)
    k, low, high = hand_kappa_interval([[5, 1], [2, 4]])
    assert k == pytest.approx(0.5)
    assert cal["kappa_low"] == pytest.approx(low, abs=1e-6) and cal["kappa_high"] == pytest.approx(high, abs=1e-6)
    assert (cal["tpr"], cal["tnr"], cal["fpr"], cal["fnr"]) == pytest.approx((5 / 6, 4 / 6, 2 / 6, 1 / 6))
    # the disagreeing cases, with both reasonings
    got = {d["test_id"]: d for d in cal["disagreements"]}
    assert set(got) == {case_id(5), case_id(6), case_id(7)}
    assert got[case_id(5)]["judge_passed"] is False and got[case_id(5)]["human_passed"] is True
    assert got[case_id(6)]["judge_reasoning"] == "case 6: the output names the database"
    assert got[case_id(6)]["human_note"] == "human on case 6"
    assert [u["test_id"] for u in report["unmatched"]] == ["cases::no-such-case"]

    # stored beside the results: the labels and the calibration, keyed by the judge identity
    store = LocalResultStore(project.store_root)
    assert len(store.labels()) == 13
    (stored,) = store.calibrations()
    some = next(r for r in store.load("sre@v1"))
    (identity,) = some.judges
    assert stored.judge_key == judge_key(identity) and stored.kappa == pytest.approx(0.5)

    # the table says the same, and the stored labels serve a second calibration without --labels
    p = calibrate(project)
    assert "0.500 [" in p.stdout and "5/2/1/4" in p.stdout
    assert "judge: case 6: the output names the database" in p.stdout
    assert "human: human on case 6" in p.stdout
    assert "1 label(s) matched no stored judge verdict" in p.stdout


def test_calibrate_of_a_run_id_and_per_criterion_rows(calib_project):
    project = calib_project
    project.judge.passes = JUDGE_PASS
    run(project)
    (the_run,) = LocalResultStore(project.store_root).list_runs()
    path = project.write_labels(
        [{"test_id": case_id(i), "run_id": the_run.id, "label": i in HUMAN_PASS} for i in range(12)]
    )
    report = json.loads(calibrate(project, the_run.id, "--labels", str(path), "--json", "--no-save").stdout)
    assert report["calibrations"][0]["confusion"] == {"tp": 5, "fp": 2, "fn": 1, "tn": 4}
    assert LocalResultStore(project.store_root).calibrations() == []  # --no-save stored nothing


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "l.jsonl",
            '{"test_id": "a", "agent": "x@1", "label": "pass"}\n{"test_id": "b", "label": "pass"}\n',
            "l.jsonl, line 2: give agent (KEY@VERSION) or run_id",
        ),
        (
            "l.jsonl",
            '{"test_id": "a", "agent": "x@1", "label": "maybe"}\n',
            "l.jsonl, line 1: label must be pass or fail",
        ),
        ("l.jsonl", '\n{"test_id": "a", "agent": "x@1", "label": "pass"\n', "l.jsonl, line 2: not JSON"),
        ("l.csv", "test_id,agent,label\na,x@1,pass\nb,x@1,pass,extra\n", "l.csv, line 3: more cells than the header"),
        ("l.csv", "test_id,agent,verdict\na,x@1,pass\n", "l.csv, line 2: unknown field(s) verdict"),
        ("l.txt", "x", "use a .jsonl or .csv file"),
    ],
)
def test_a_bad_labels_file_is_one_error_naming_file_and_line(tmp_path, name, text, message):
    from agent_health.analysis.labels import load_labels
    from agent_health.errors import UsageError

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_labels(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_csv_labels_file_loads_like_jsonl(tmp_path):
    from agent_health.analysis.labels import load_labels

    path = tmp_path / "l.csv"
    header = "test_id,agent,criterion,label,score,note,labeller\n"
    path.write_text(header + "a,x@1,,fail,0.2,wrong db,ana\nb,x@1,c,pass,,,\n")
    a, b = load_labels(path)
    assert (a.test_id, a.passed, a.score, a.note, a.criterion) == ("a", False, 0.2, "wrong db", None)
    assert (b.passed, b.criterion, b.source) == (True, "c", f"{path}:3")
