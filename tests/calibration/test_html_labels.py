"""The HTML report's label control in a real browser (headless Chromium): a person labels verdicts
of a run judged by a real judge server, exports them, and the exported file is the labels file
`agent-health calibrate --labels` reads, matching the stored verdicts."""

from __future__ import annotations

import json

from agent_health.analysis.labels import load_labels
from agent_health.model.calibration import judge_key
from agent_health.stores import LocalResultStore
from tests.support.browser import Page

from ..conftest import run_cli
from .conftest import case_id
from .test_calibrate_cli import JUDGE_PASS


def test_labels_given_in_the_report_export_the_labels_file_calibrate_reads(calib_project, browser):
    project = calib_project
    project.judge.passes = JUDGE_PASS
    p = run_cli("run", "evals", "--reporter", "html=report.html", cwd=project.root)
    assert p.returncode == 1, p.stdout + p.stderr
    with Page(browser, project.root / "report.html") as page:
        for i, value, note in ((5, "pass", "names the database late"), (6, "fail", "blames the network")):
            test = page.page.locator(f'.test[id="{case_id(i)}"]')
            test.locator(".row").click()
            control = test.locator(".label-control")
            control.locator("input.label-note").fill(note)
            control.locator(f"button.label-{value}").click()
            assert "chosen" in (control.locator(f"button.label-{value}").get_attribute("class") or "")
        assert page.page.text_content("#label-count") == "2"
        page.page.fill("#labeller", "ana")
        with page.page.expect_download() as download:
            page.page.click("#export-labels")
        path = project.root / "labels.jsonl"
        download.value.save_as(str(path))
        assert page.errors == []

    five, six = sorted(load_labels(path), key=lambda lab: lab.test_id)
    store = LocalResultStore(project.store_root)
    (run,) = store.list_runs()
    (identity,) = store.load("sre@v1")[0].judges
    assert (five.test_id, five.agent, five.run_id, five.passed, five.labeller) == (
        case_id(5),
        "sre@v1",
        run.id,
        True,
        "ana",
    )
    assert five.criterion == "identifies the database as the cause" and five.judge == judge_key(identity)
    assert (six.passed, six.note) == (False, "blames the network")

    report = json.loads(run_cli("calibrate", "--labels", str(path), "--json", cwd=project.root).stdout)
    (cal,) = report["calibrations"]
    # case 5: the judge failed what the human passes; case 6: the judge passed what the human fails
    assert cal["n"] == 2 and cal["confusion"] == {"tp": 0, "fp": 1, "fn": 1, "tn": 0}
    assert {d["human_note"] for d in cal["disagreements"]} == {"names the database late", "blames the network"}
