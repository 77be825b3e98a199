"""Every example of docs/judges.md, run: the labels files, the commands with their exit codes, the
hand-computed worked example against what `calibrate` prints, the gate's configuration and its
warning, against a real judge server on 127.0.0.1 that disagrees with the labels on known cases."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from agent_health import load_config
from tests.conftest import ROOT
from tests.support.cli import cli_in_process

from .test_calibrate_cli import JUDGE_PASS

DOC = ROOT / "docs" / "judges.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def block(lang: str, nth: int = 0) -> str:
    return [code for found, code in FENCE.findall(DOC.read_text()) if found == lang][nth]


def commands(code: str) -> list[tuple[list[str], int]]:
    """(argv after `agent-health`, expected exit code from an `exits N` comment, else 0)."""
    out = []
    for line in code.splitlines():
        text, _, comment = line.partition("#")
        if text.strip():
            m = re.search(r"exits (\d)", comment)
            out.append((shlex.split(text)[1:], int(m.group(1)) if m else 0))
    return out


def run_doc_command(project, argv, code):
    p = cli_in_process(*argv, cwd=project.root)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == code, p.stdout + p.stderr
    return p


def test_the_worked_example_matches_what_calibrate_prints(calib_project):
    project = calib_project
    project.judge.passes = JUDGE_PASS  # "The judge passed cases 0-4, 6 and 7"
    assert "The judge passed cases 0-4, 6 and 7" in DOC.read_text()
    assert cli_in_process("run", "evals", cwd=project.root).returncode == 1
    (project.root / "labels.csv").write_text(block("csv"))

    (table_cmd, table_code), (json_cmd, json_code) = commands(block("bash", 0))
    table = run_doc_command(project, table_cmd, table_code).stdout
    report = json.loads(run_doc_command(project, json_cmd, json_code).stdout)
    (cal,) = report["calibrations"]

    hand = block("text", 1)
    counts = {k: int(v) for v, k in re.findall(r"(\d+) \((TP|FN|FP|TN)\)", hand)}
    assert cal["confusion"] == {"tp": counts["TP"], "fp": counts["FP"], "fn": counts["FN"], "tn": counts["TN"]}
    assert cal["agreement"] == pytest.approx(float(re.search(r"po = .* = ([\d.]+)", hand).group(1)))
    kappa, low, high = re.search(r"kappa .* = ([\d.]+), 95% interval \[([\d.]+), ([\d.]+)\]", hand).groups()
    assert round(cal["kappa"], 3) == float(kappa)
    assert (round(cal["kappa_low"], 3), round(cal["kappa_high"], 3)) == (float(low), float(high))
    for name in ("TPR", "TNR", "FPR", "FNR"):
        assert round(cal[name.lower()], 3) == float(re.search(rf"{name} \S+ = ([\d.]+)", hand).group(1))
    # what the page says the table shows, and the disagreements with both reasonings
    for shown in re.search(r"prints the same \((.*?)\)", DOC.read_text()).group(1).split(", "):
        assert shown.strip("`") in table
    assert {d["test_id"] for d in cal["disagreements"]} == {"cases::case-05", "cases::case-06", "cases::case-07"}
    assert "human: blames the network" in table and "judge: case 6: the output names the database" in table


def test_the_jsonl_labels_load_and_the_documented_error_is_the_real_one(calib_project, tmp_path):
    from agent_health.analysis.labels import load_labels

    good = tmp_path / "labels.jsonl"
    good.write_text(block("jsonl"))
    first, second = load_labels(good)
    assert (first.test_id, first.agent, first.passed, first.labeller) == ("cases::case-05", "sre@v1", True, "ana")
    assert (second.criterion, second.passed) == (None, False)

    lines = block("jsonl").splitlines()
    bad = json.loads(lines[1])
    del bad["agent"]
    (calib_project.root / "labels.jsonl").write_text(lines[0] + "\n" + json.dumps(bad) + "\n")
    p = cli_in_process("calibrate", "--labels", "labels.jsonl", cwd=calib_project.root)
    assert p.returncode == 2 and p.stderr.strip() == block("text", 0).strip()


def test_the_gate_configuration_loads(tmp_path):
    (tmp_path / "agent_health_config.py").write_text(block("python"))
    config = load_config(str(tmp_path / "agent_health_config.py"))
    gate = config.judge.calibration
    assert gate is not None and (gate.min_kappa, gate.min_labels) == (0.6, 30)


def test_the_gate_warning_and_require_calibrated_are_the_real_ones(calib_project):
    project = calib_project
    project.judge.passes = JUDGE_PASS
    project.configure(calibration={"min_kappa": 0.6, "min_labels": 30}, cache=False)
    p = cli_in_process("run", "evals", cwd=project.root)
    assert p.returncode == 0, p.stdout + p.stderr  # the failing verdicts only observed
    assert block("text", 2).strip() in p.stdout
    ((argv, code),) = commands(block("bash", 1))
    p = run_doc_command(project, argv, code)
    assert "is not calibrated: it has no calibration" in p.stderr
