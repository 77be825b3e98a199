"""The calibration gate (`judge.calibration`): a gating judge without a good enough calibration still
runs, but its verdicts only observe, and the summary, the JSON report and the run manifest say so;
`--require-calibrated` makes that an error (exit 2). A real judge server on 127.0.0.1 judges."""

from __future__ import annotations

import json

import pytest

from agent_health.stores import LocalResultStore
from tests.support.cli import cli_in_process

from .conftest import case_id
from .test_calibrate_cli import HUMAN_PASS, JUDGE_PASS, labels

GATE = {"min_kappa": 0.6, "min_labels": 10}


def run(project, *args, expect):
    p = cli_in_process("run", "evals", "--agent", "sre@v1", "--no-cache", "--reporter", "json=report.json", *args,
                cwd=project.root)  # fmt: skip
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == expect, p.stdout + p.stderr
    return p, json.loads((project.root / "report.json").read_text())


def verdicts(report):
    return {r["test_id"]: s for r in report["results"] for s in r["signals"] if s["kind"] == "judge"}


def test_an_uncalibrated_gating_judge_only_observes_and_every_output_says_so(calib_project):
    project = calib_project
    project.judge.passes = JUDGE_PASS  # fails cases 5 and 8-11
    project.configure(calibration=GATE)

    p, report = run(project, "--reporter", "html=report.html", expect=0)  # the failing verdicts did not gate
    warning = "judge openai:judge-a (builtin:contextual) is not calibrated: it has no calibration"
    page = (project.root / "report.html").read_text()
    assert 'id="run-warnings"' in page and warning in page.replace("&#39;", "'")
    assert f"warning: {warning}" in p.stdout and "its verdicts only observe" in p.stdout
    assert any(warning in w for w in report["warnings"])
    failed = verdicts(report)[case_id(9)]
    assert failed["passed"] is False and failed["role"] == "observe"
    assert "no calibration" in failed["evidence"]["calibration"]
    assert all(r["status"] == "passed" for r in report["results"])
    store = LocalResultStore(project.store_root)
    (manifest,) = store.list_runs()
    assert any(warning in w for w in manifest.warnings)
    # each result says which judge did not gate, in the part rollups read
    (summary,) = store.get_summaries([next(k for k in store.list() if k.test_id == case_id(9))])
    assert summary.uncalibrated_judges == ("openai:judge-a (builtin:contextual): " + failed["evidence"]["calibration"],)

    # a calibration with kappa 0.5 (hand-computed in test_calibrate_cli) is below min_kappa 0.6
    assert cli_in_process("calibrate", "--labels", str(labels(project)), cwd=project.root).returncode == 0
    p, report = run(project, expect=0)
    assert "kappa 0.500 is below min_kappa 0.6" in p.stdout
    assert verdicts(report)[case_id(9)]["role"] == "observe"


def test_a_calibrated_judge_gates(calib_project):
    project = calib_project
    project.judge.passes = HUMAN_PASS  # agrees with every label: kappa 1
    project.configure(calibration=GATE)
    run(project, expect=0)  # uncalibrated yet: observes
    assert cli_in_process("calibrate", "--labels", str(labels(project)), cwd=project.root).returncode == 0

    p, report = run(project, expect=1)  # now its failing verdicts fail their tests
    assert report["warnings"] == [] and "not calibrated" not in p.stdout + p.stderr
    v = verdicts(report)[case_id(9)]
    assert v["role"] == "gate" and "calibration" not in v["evidence"] and v["evidence"]["calibrated"] is True
    store = LocalResultStore(project.store_root)
    (summary,) = store.get_summaries([next(k for k in store.list() if k.test_id == case_id(9))])
    assert summary.calibrated_judges == ("openai:judge-a (builtin:contextual)",) and not summary.uncalibrated_judges
    assert {r["test_id"] for r in report["results"] if r["status"] == "failed"} == {case_id(i) for i in range(6, 12)}


def test_require_calibrated_exits_2_naming_the_judge(calib_project):
    project = calib_project
    project.judge.passes = JUDGE_PASS
    project.configure(calibration=GATE)
    p, report = run(project, "--require-calibrated", expect=2)
    assert "error: judge openai:judge-a (builtin:contextual) is not calibrated: it has no calibration" in p.stderr
    assert "--require-calibrated" in p.stderr
    v = verdicts(report)[case_id(0)]
    assert v["errored"] is True and "--require-calibrated refuses its verdicts" in v["reasoning"]
    assert project.judge.server.posts() == []  # refused before it was asked: nothing spent on it


def test_require_calibrated_without_a_configured_gate_uses_the_default_one(calib_project):
    project = calib_project
    project.judge.passes = HUMAN_PASS
    p, _ = run(project, "--require-calibrated", expect=2)
    assert "it has no calibration" in p.stderr


@pytest.mark.parametrize(
    "gate, message",
    [
        ({"min_kappa": 2}, "judge.calibration.min_kappa: Input should be less than or equal to 1"),
        ({"min_kapa": 0.5}, "judge.calibration.min_kapa: unknown field"),
        ({"min_labels": 0}, "judge.calibration.min_labels: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_gate_setting_is_one_error_naming_it(tmp_path, gate, message):
    from agent_health import load_config
    from agent_health.errors import ConfigError

    path = tmp_path / "agent_health_config.py"
    path.write_text(
        f"from agent_health import define_config\nconfig = define_config(judge={{'calibration': {gate!r}}})\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_damaged_calibrations_file_stops_the_run_before_any_test_naming_the_line(calib_project):
    project = calib_project
    project.configure(calibration=GATE)
    folder = project.store_root / "_calibration"
    folder.mkdir(parents=True)
    (folder / "calibrations.jsonl").write_text('{"judge_key": "x"}\n')
    p = cli_in_process("run", "evals", cwd=project.root)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "calibrations.jsonl, line 1" in p.stderr
    assert project.agent.calls == 0  # nothing ran


def test_require_calibrated_from_the_environment_as_from_the_flag(calib_project):
    """One declaration gives the setting its variable too (AGENT_HEALTH_REQUIRE_CALIBRATED)."""
    project = calib_project
    project.judge.passes = JUDGE_PASS
    project.configure(calibration=GATE)
    p = cli_in_process("run", "evals", "--agent", "sre@v1", "--no-cache", cwd=project.root,
                env={"AGENT_HEALTH_REQUIRE_CALIBRATED": "1"})  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    assert "error: judge openai:judge-a (builtin:contextual) is not calibrated" in p.stderr
    assert project.judge.server.posts() == []
