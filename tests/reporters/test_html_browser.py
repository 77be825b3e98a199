"""The report pages in a real browser: headless Chromium (Debian's package) driven by Playwright.
Renders without console errors, filters and sorts, deep links open their test, the comparison page
shows flips side by side, and hostile agent output stays text."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from agent_health import RunReport
from agent_health.analysis.compare import compare_results
from agent_health.model import JudgeIdentity, Judgement, Provenance, Verdict
from agent_health.reporters.html import ReportBuilder, write_comparison, write_report, write_run_report
from tests.reports.helpers import epochs, result
from tests.support.browser import Page
from tests.support.report_project import HOSTILE


@pytest.fixture(scope="module")
def pages(report_project, tmp_path_factory):
    out = tmp_path_factory.mktemp("pages")
    both = RunReport.model_validate_json(report_project.both.read_bytes())
    v1 = RunReport.model_validate_json(report_project.v1.read_bytes())
    v2 = RunReport.model_validate_json(report_project.v2.read_bytes())
    hostile = RunReport.model_validate_json(report_project.hostile.read_bytes())
    return {
        "both": (write_run_report(out / "both.html", both), both),
        "hostile": (write_run_report(out / "hostile.html", hostile), hostile),
        "compare": (
            write_comparison(out / "compare.html", compare_results(v1.results, v2.results), v1.results, v2.results),
            (v1, v2),
        ),
    }


def test_report_renders_without_console_errors_and_opens_a_test(browser, pages):
    path, report = pages["both"]
    with Page(browser, path) as p:
        assert p.count_text() == "30 of 30 shown"
        assert "demo@v1" in p.page.text_content("#summary") and "demo@v2" in p.page.text_content("#summary")
        key = "demo@v2/rca::payment-outage-is-traced-to-the-database"
        test = p.page.locator(f'.test[id="{key}"]')
        test.locator(".row").click()
        detail = test.locator(".detail")
        text = detail.inner_text()
        # the trajectory with tool arguments, the verdicts with their reasoning, metrics, provenance
        assert "tool call · search_logs" in text and '"service":"payment-service"' in text.replace(" ", "")
        assert "Verdicts" in text.title() and "identifies that the payment service cannot reach its database" in text
        result = next(r for r in report.results if f"{r.agent}/{r.test_id}" == key)
        verdict = next(s for s in result.signals if s.kind == "judge")
        assert verdict.reasoning and verdict.reasoning in text
        assert "Derived metrics".upper() in text.upper() and result.content_hash in text
        # closing and reopening keeps one details row
        test.locator(".row").click()
        assert not detail.is_visible()
        test.locator(".row").click()
        assert test.locator(".detail").count() == 1 and detail.is_visible()
        assert p.errors == []


def test_filters_by_status_label_suite_agent_and_search(browser, pages):
    path, report = pages["both"]
    with Page(browser, path) as p:
        failed = {f"{r.agent}/{r.test_id}" for r in report.results if r.status == "failed"}
        p.page.select_option("#f-status", "failed")
        assert set(p.visible_keys()) == failed and p.count_text() == f"{len(failed)} of 30 shown"
        p.page.select_option("#f-agent", "demo@v1")
        assert set(p.visible_keys()) == {k for k in failed if k.startswith("demo@v1/")}
        p.page.select_option("#f-status", "")
        p.page.select_option("#f-agent", "")
        p.page.select_option("#f-label", "difficulty:Hard")
        hard = {f"{r.agent}/{r.test_id}" for r in report.results if "difficulty:Hard" in r.labels}
        assert set(p.visible_keys()) == hard and hard
        p.page.select_option("#f-label", "")
        p.page.select_option("#f-suite", "smoke")
        assert set(p.visible_keys()) == {f"{r.agent}/{r.test_id}" for r in report.results if r.suite == "smoke"}
        p.page.select_option("#f-suite", "")
        word = "latency"
        p.page.fill("#f-search", word)
        matching = {f"{r.agent}/{r.test_id}" for r in report.results if word in (r.name + " " + r.test_id).lower()}
        assert set(p.visible_keys()) == matching and matching
        assert p.errors == []


def test_sorts_by_score_cost_and_duration(browser, pages):
    path, _ = pages["both"]
    with Page(browser, path) as p:
        for option, attr, descending in [
            ("score:asc", "score", False),
            ("score:desc", "score", True),
            ("cost:desc", "cost", True),
            ("duration:desc", "duration", True),
        ]:
            p.page.select_option("#sort", option)
            raw = p.attr_of_visible(attr)
            known = [float(v) for v in raw if v != ""]
            assert known == sorted(known, reverse=descending), option
            assert raw[: len(known)] == [v for v in raw if v != ""]  # missing values sort last
        # back to the default order: failures first
        p.page.select_option("#sort", "")
        statuses = p.attr_of_visible("status")
        assert statuses == sorted(statuses, key=["errored", "failed", "passed"].index)
        assert p.errors == []


def test_deep_link_scrolls_to_and_opens_the_test_even_when_filtered_out(browser, pages):
    path, report = pages["both"]
    passed = [r for r in report.results if r.status == "passed"]
    target = passed[-1]
    key = f"{target.agent}/{target.test_id}"
    with Page(browser, path, "#" + quote(key, safe="")) as p:
        test = p.page.locator(f'.test[id="{key}"]')
        assert "open" in test.get_attribute("class") and "target" in test.get_attribute("class")
        # scrolled to: the row sits near the top of the viewport, not under the sticky controls
        box = test.locator(".row").bounding_box()
        assert box is not None and 0 < box["y"] < 200
        hit = p.page.evaluate(
            f"document.elementFromPoint({box['x'] + 40}, {box['y'] + box['height'] / 2}).closest('.test')?.id"
        )
        assert hit == key
        assert target.name in test.locator(".detail").inner_text()
        # a link to a test the filters hide clears the filters
        p.page.select_option("#f-status", "failed")
        other = passed[0]
        other_key = f"{other.agent}/{other.test_id}"
        p.page.evaluate("k => { location.hash = encodeURIComponent(k); }", other_key)
        other_test = p.page.locator(f'.test[id="{other_key}"]')
        other_test.locator(".detail").wait_for()
        assert other_test.is_visible() and p.page.input_value("#f-status") == ""
        # the row's own link is the deep link
        href = other_test.locator("a.link").get_attribute("href")
        assert href.startswith("#") and p.page.evaluate("h => decodeURIComponent(h.slice(1))", href) == other_key
        assert p.errors == []


def test_hostile_output_stays_text(browser, pages):
    path, _ = pages["hostile"]
    with Page(browser, path) as p:
        test = p.page.locator(".test").first
        test.locator(".row").click()
        detail = test.locator(".detail")
        text = detail.inner_text()
        # shown verbatim, as text, in the output, the thinking, the tool arguments and results, the verdict
        for shown in ("answer " + HOSTILE, "thinking " + HOSTILE, "logs " + HOSTILE):
            assert shown in text
        assert text.count(HOSTILE) >= 5
        # nothing ran and nothing became markup
        assert p.dialogs == []
        assert detail.locator("img, script, b:text-is('bold?')").count() == 0
        assert p.page.evaluate("document.querySelectorAll('script:not([type])').length") == 1
        assert p.errors == []


def test_comparison_page_shows_flips_and_side_by_side_trajectories(browser, pages):
    path, (v1, v2) = pages["compare"]
    cmp = compare_results(v1.results, v2.results)
    with Page(browser, path) as p:
        counts = p.page.text_content("#flip-counts")
        assert f"{cmp.flip_counts['fixed']} fixed" in counts and f"{cmp.flip_counts['regressed']} regressed" in counts
        assert f"{cmp.stats.mcnemar.p_value:.4g}" == p.page.text_content("#p-value")
        p.page.select_option("#f-flip", "regressed")
        assert set(p.visible_keys()) == set(cmp.regressed_tests)
        flipped = cmp.regressed_tests[0]
        test = p.page.locator(f'.test[id="{flipped}"]')
        test.locator(".row").click()
        sides = test.locator(".sides > div")
        assert sides.count() == 2
        left, right = sides.nth(0).inner_text(), sides.nth(1).inner_text()
        assert "Baseline · demo@v1" in left and "Candidate · demo@v2" in right
        assert "Steps (" in left and "Steps (" in right and "passed" in left and "failed" in right
        # a test with the same status on both sides has no side-by-side details
        p.page.select_option("#f-flip", "same")
        same = p.page.locator(".test:not([hidden])").first
        same.locator(".row").click()
        assert "Same status on both sides" in same.inner_text()
        assert p.errors == []


def test_provenance_and_earlier_judgements_are_shown(browser, tmp_path):
    identity = JudgeIdentity(
        provider="openai",
        model="gpt-4o-mini",
        endpoint="http://judge.internal/v1",
        evaluator="rca",
        kind="rubric",
        definition_hash="rubric-def-1234",
        prompt_version="judge-prompt/2",
        cache_keys=("c0ffee" * 4,),
    )
    old = Verdict(
        passed=True,
        score=0.9,
        reasoning="names the database",
        criteria="finds the cause",
        evaluator="rca",
        model="gpt-4o-mini",
        identity=identity,
    )
    first = result(
        "prov",
        score=0.9,
        signals=(old.to_signal(),),
        eval_run_id="20260101T000000-00000001",
        provenance=Provenance(harness_version="0.2.0", agent_settings_hash="abc123", judged_at=1767225600.0),
    )
    newer_identity = identity.model_copy(update={"model": "gpt-4.1", "cache_keys": ("beef" * 6,)})
    new = old.model_copy(
        update={"passed": False, "score": 0.2, "reasoning": "misses the database", "model": "gpt-4.1"}
        | {"identity": newer_identity}
    )
    r = first.model_copy(
        update={
            "status": "failed",
            "score": 0.2,
            "signals": (new.to_signal(),),
            "eval_run_id": "20260102T000000-00000002",
            "provenance": first.provenance.model_copy(update={"judged_at": 1767312000.0}),
            "judgements": (Judgement.of(first),),
        }
    )
    path = ReportBuilder().extend([r]).write(tmp_path / "prov.html")
    with Page(browser, path, "#s::prov") as p:
        text = p.page.locator(".test .detail").inner_text()
        assert "harness_version\t0.2.0" in text and "agent_settings_hash\tabc123" in text
        assert "judged_at\t2026-01-02 00:00:00 UTC" in text
        # the newest verdict names its judge, with the identity's fields
        assert "rca · gpt-4.1" in text and "definition_hash\trubric-def-1234" in text and "beef" * 6 in text
        # the earlier judgement: its time, run, judge, status and verdict
        history = p.page.locator(".judgement")
        assert history.count() == 1
        earlier = history.first.inner_text()
        assert "earlier judgements (1)" in text.lower() and "passed" in earlier and "score 0.90" in earlier
        assert "2026-01-01 00:00:00 UTC" in earlier and "run 20260101T000000-00000001" in earlier
        assert "openai:gpt-4o-mini" in earlier and "names the database" in earlier and "c0ffee" * 4 in earlier
        assert p.errors == []


# Each header cell of the test list: its own box, and the box its text actually covers (wider than
# the cell when the text overflows it).
HEADER_BOXES = """() => [...document.querySelectorAll('#tests .row.head > span')]
  .filter(cell => cell.textContent.trim())
  .map(cell => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    const text = range.getBoundingClientRect(), box = cell.getBoundingClientRect();
    return {name: cell.textContent, left: text.left, right: text.right, top: text.top, bottom: text.bottom,
            cell_left: box.left, cell_right: box.right};
  })"""


def _overlap(a: dict, b: dict) -> bool:
    return (
        a["left"] < b["right"] - 0.5
        and b["left"] < a["right"] - 0.5
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    )


@pytest.mark.parametrize("width", [1400, 1024])
def test_comparison_headers_never_overprint_each_other(browser, tmp_path, width):
    """The score, cost and latency headers of the comparison page each stay inside their own
    column, on a wide and a laptop-sized window (they used to run into each other)."""
    long_id = "availability/missing-dns-record-for-the-inventory-database"
    base = [
        result(long_id, "passed", score=0.875, cost_usd=0.012345, duration_ms=1234.5),
        result("cache", "failed", score=0.125, cost_usd=0.5, duration_ms=98765.4),
        epochs("memory-leak", 0, 3, score=0.0),
    ]
    cand = [
        result(long_id, "failed", "demo@v2", score=0.125, cost_usd=0.0234567, duration_ms=123456.7),
        result("cache", "passed", "demo@v2", score=1.0, cost_usd=0.25, duration_ms=1.2),
        epochs("memory-leak", 3, 0, "demo@v2", score=1.0),
    ]
    path = write_comparison(tmp_path / "compare.html", compare_results(base, cand), base, cand)
    with Page(browser, path, width=width) as p:
        boxes = p.page.evaluate(HEADER_BOXES)
        names = [b["name"] for b in boxes]
        assert len(names) == 9 and "baseline score" in names and "latency delta" in names, names
        for b in boxes:  # the text stays inside its own cell
            assert b["cell_left"] - 0.5 <= b["left"] and b["right"] <= b["cell_right"] + 0.5, (width, b)
        clashes = [(a["name"], b["name"]) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if _overlap(a, b)]
        assert clashes == [], (width, clashes)
        assert p.errors == []


def test_a_runs_roles_and_artifacts_are_shown(browser, tmp_path):
    """Each step names its role (the prompt opens as `user`); each artifact its name, media type and
    size, a text copy as text, a binary copy as a download, an uncopied one as not stored."""
    from agent_health.model import Artifact, RunResult, Step

    run = RunResult(
        run_id="r1",
        prompt="write the RCA",
        output="done",
        trajectory=(
            Step(kind="message", role="user", content="write the RCA"),
            Step(kind="message", role="system", content="Claude Code session s1"),
            Step(kind="tool_call", tool="Write", args={"file_path": "rca.md"}, call_id="t1"),
            Step(kind="tool_result", tool="Write", call_id="t1", content="ok"),
            Step(kind="message", content="done"),
        ),
        artifacts=(
            Artifact(
                name="rca.md", media_type="text/markdown", size=20, content="# RCA <b>db</b> down", encoding="utf-8"
            ),
            Artifact(name="plots/chart.png", media_type="image/png", size=4, content="iVBORw==", encoding="base64"),
            Artifact(name="dump.bin", size=5_000_000, sha256="ab" * 32),
        ),
    )
    path = write_report(tmp_path / "artifacts.html", [result("artifacts", run=run)])
    with Page(browser, path) as p:
        test = p.page.locator('.test[id="s::artifacts"]')
        test.locator(".row").click()
        text = test.locator(".detail").inner_text()
        assert "message · user" in text and "message · system" in text
        assert "tool call · Write #t1 · assistant" in text and "tool result · Write #t1 · tool" in text
        assert "Artifacts (3)".upper() in text.upper()
        assert "rca.md · text/markdown · 20 B" in text and "# RCA <b>db</b> down" in text  # text, never markup
        assert (
            "plots/chart.png · image/png · 4 B" in text and "dump.bin · application/octet-stream · 4882.8 KiB" in text
        )
        assert "not stored" in text and "sha256 " + "ab" * 32 in text
        link = test.locator('.artifact a[download="chart.png"]')
        assert link.get_attribute("href") == "data:image/png;base64,iVBORw=="
        assert p.errors == []


def test_a_conversation_shows_turn_by_turn(browser, tmp_path):
    """The shipped conversational suite's simulated user, as the report shows it: each turn's user
    message, the agent's steps and its answer, in order, and how the conversation ended."""
    from concurrent.futures import ThreadPoolExecutor

    from agent_health import define_config, load_tests, run_tests
    from agent_health.model import RunSettings
    from tests.conftest import ROOT

    tests = load_tests([ROOT / "evals" / "conversations.eval.py"]).tests
    settings = RunSettings(agents=("demo@v2",), store=None)
    with ThreadPoolExecutor(1) as pool:  # the browser's driver holds this thread's event loop
        results = pool.submit(run_tests, tests, define_config(root=str(tmp_path)), settings=settings).result()
    path = write_report(tmp_path / "conversation.html", results)
    key = "conversations::a-simulated-on-call-engineer-learns-why-checkout-is-slow"
    with Page(browser, path) as p:
        test = p.page.locator(f'.test[id="{key}"]')
        test.locator(".row").click()
        text = test.locator(".detail").inner_text()
        assert "2 turns, a simulated user, ended: goal_reached (goal reached at turn 2)" in text
        first, second = text.index("Turn 1"), text.index("Turn 2")
        question = text.index("Which service is affected")
        assert first < text.index("Something is broken in production") < question < second
        assert second < text.index("checkout p99 latency is 4 seconds") < text.index("tool call · search_logs")
        assert "learn that the redis cache hit ratio dropped" in text and "demo:simulated-user/1" in text
        assert p.errors == []
