"""`--reporter junit[=FILE]`: JUnit XML, a testsuite per eval file (and agent), a testcase per test.

The output validates against the common JUnit schema (Jenkins xunit's junit-10.xsd, which the
other CI readers accept too): properties only at testsuite level (per-suite figures), per-test
figures in the testcase's `system-out`, and every text and attribute reduced to what XML 1.0 may
hold (ANSI colour codes removed, other forbidden characters written as visible escapes).
"""

from __future__ import annotations

import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable

from agent_health.analysis.metrics import shown_signals
from agent_health.model import RunReport, TestResult
from agent_health.model.report import SummaryTally
from agent_health.reporters.base import Reporter
from agent_health.reporters.output import ReportOutput
from agent_health.reporters.text import xml_safe


def _details(r: TestResult) -> str:
    lines = [
        f"{'PASS' if s.passed else 'SKIP' if s.skipped else 'ERR ' if s.errored else 'FAIL'} "
        f"[{s.kind}/{s.role}] {s.name}" + (f": {s.reasoning}" if s.reasoning else "")
        for s in shown_signals(r)
    ]
    return "\n".join(lines)


def _figures(r: TestResult) -> str:
    """Per-test figures (the schema has no per-testcase properties), one `name: value` a line."""
    values = (
        ("test_id", r.test_id),
        ("agent", r.agent),
        ("status", r.status),
        ("score", r.score),
        ("total_tokens", r.usage.total_tokens),
        ("judge_tokens", r.judge_usage.total_tokens),
        ("cost_usd", r.cost_usd),
        ("evaluation_type", r.evaluation_type),
        ("pass_at_k", r.pass_at_k),
        ("run_id", r.run_id),
    )
    return "\n".join(f"{name}: {value}" for name, value in values if value is not None)


def _properties(parent: ET.Element, values: list[tuple[str, object]]) -> None:
    props = ET.SubElement(parent, "properties")
    for name, value in values:
        if value is not None:
            ET.SubElement(props, "property", name=name, value=str(value))


def _sanitize(tree: ET.Element) -> None:
    """Every attribute and text of `tree` made XML 1.0-safe (see reporters/text.py)."""
    for el in tree.iter():
        el.attrib = {k: xml_safe(v) for k, v in el.attrib.items()}
        if el.text:
            el.text = xml_safe(el.text)


def testcase(r: TestResult) -> ET.Element:
    """One result as a `<testcase>` (its failure or error, its figures in `system-out`)."""
    case = ET.Element("testcase", name=r.name, classname=r.suite, time=f"{r.duration_ms / 1000:.3f}")
    if r.status == "failed":
        ET.SubElement(case, "failure", message=r.error or "failed", type="AssertionError").text = _details(r)
    elif r.status == "errored":
        ET.SubElement(case, "error", message=r.error or "errored", type="InfrastructureError").text = _details(r)
    ET.SubElement(case, "system-out").text = _figures(r)
    _sanitize(case)
    return case


class _Suite:
    """One testsuite (an eval file against one agent version): its tally, and its testcases
    spooled to a temporary file so nothing is kept per result."""

    def __init__(self, agent: str, file: str, suite: str):
        self.agent, self.file, self.suite = agent, file, suite
        self.tally = SummaryTally(agent)
        self.seconds = 0.0
        self.spool = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 - closed in write_to()

    def add(self, r: TestResult) -> None:
        self.tally.add(r)
        self.seconds += r.duration_ms / 1000
        case = testcase(r)
        ET.indent(case, space="  ", level=2)
        self.spool.write("    " + ET.tostring(case, encoding="unicode").rstrip() + "\n")

    def write_to(self, out: Callable[[str], None]) -> None:
        summary = self.tally.summary(0.0)
        suite = ET.Element(
            "testsuite",
            name=f"{self.file} [{self.agent}]",
            tests=str(summary.total),
            failures=str(summary.failed),
            errors=str(summary.errored),
            skipped="0",
            time=f"{self.seconds:.3f}",
            file=self.file,
        )
        _properties(
            suite,
            [
                ("agent", self.agent),
                ("suite", self.suite),
                ("pass_rate", summary.pass_rate),
                ("mean_score", summary.mean_score),
                ("total_tokens", summary.total_tokens),
                ("judge_tokens", summary.judge_tokens),
                ("cost_usd", summary.cost_usd),
            ],
        )
        _sanitize(suite)
        ET.indent(suite, space="  ", level=1)
        opening = ET.tostring(suite, encoding="unicode").rstrip()
        out("  " + opening.removesuffix("</testsuite>").rstrip() + "\n")  # the header, then the cases
        self.spool.seek(0)
        for line in self.spool:
            out(line)
        out("  </testsuite>\n")
        self.spool.close()


class JunitReporter(Reporter):
    """`--reporter junit[=FILE]`: a testsuite per eval file and agent version, a testcase per test.
    Streams: each testcase is rendered when its result arrives and spooled to a temporary file, so
    memory stays flat in the number of tests; the document is assembled at the end."""

    keeps_results = False

    def __init__(self, path: str | None = None):
        self.path = path
        self.name = f"junit={path}" if path else "junit"
        self._suites: dict[tuple[str, str], _Suite] = {}

    def result(self, result: TestResult) -> None:
        key = (result.agent, result.source_file)
        if key not in self._suites:
            self._suites[key] = _Suite(result.agent, result.source_file, result.suite)
        self._suites[key].add(result)

    def finish(self, report: RunReport) -> None:
        out = ReportOutput(self.name, self.path, atomic=True)
        out.open()
        try:
            self.write_document(report, out.write)
        except BaseException:
            out.discard()
            raise
        out.close()

    def write_document(self, report: RunReport, out: Callable[[str], None]) -> None:
        suites = [self._suites[k] for k in sorted(self._suites)]
        totals = SummaryTally("all")
        for s in suites:
            totals.counts = {k: totals.counts[k] + s.tally.counts[k] for k in totals.counts}
        root = ET.Element(
            "testsuites",
            name="agent-health",
            tests=str(totals.total + len(report.load_errors) + len(report.not_run_tests)),
            failures=str(totals.counts["failed"]),
            errors=str(totals.counts["errored"] + len(report.load_errors)),
            time=f"{max(0.0, report.finished_at - report.started_at):.3f}",
        )
        opening = ET.tostring(root, encoding="unicode").removesuffix(" />").removesuffix("/>")
        out(f'<?xml version="1.0" encoding="UTF-8"?>\n{opening}>\n')
        for s in suites:
            s.write_to(out)
        for err in report.load_errors:
            suite = ET.Element("testsuite", name="load errors", tests="1", failures="0", errors="1")
            case = ET.SubElement(suite, "testcase", name=err.split(":", 1)[0], classname="load")
            ET.SubElement(case, "error", message=err, type="EvalFileError")
            _sanitize(suite)
            ET.indent(suite, space="  ", level=1)
            out("  " + ET.tostring(suite, encoding="unicode").rstrip() + "\n")
        _write_not_run(report, out)
        out("</testsuites>\n")
        self._suites.clear()

    def abort(self) -> None:
        for s in self._suites.values():
            s.spool.close()
        self._suites.clear()


def _write_not_run(report: RunReport, out: Callable[[str], None]) -> None:
    """The tests the run never started (budget reached, fail-fast, interruption): a `not run`
    testsuite per agent version, each test a skipped testcase whose message says why."""
    agents = list(dict.fromkeys(t.agent for t in report.not_run_tests))
    for agent in agents:
        tests = [t for t in report.not_run_tests if t.agent == agent]
        suite = ET.Element(
            "testsuite",
            name=f"not run [{agent}]",
            tests=str(len(tests)),
            failures="0",
            errors="0",
            skipped=str(len(tests)),
            time="0.000",
        )
        for t in tests:
            case = ET.SubElement(suite, "testcase", name=t.name, classname=t.suite, time="0.000")
            ET.SubElement(case, "skipped", message=f"not run: {t.reason}")
        _sanitize(suite)
        ET.indent(suite, space="  ", level=1)
        out("  " + ET.tostring(suite, encoding="unicode").rstrip() + "\n")


def junit_xml(report: RunReport) -> str:
    """The whole JUnit document of a report's results as text (well-formed XML 1.0 whatever the
    results hold)."""
    reporter = JunitReporter()
    for r in report.results:
        reporter.result(r)
    parts: list[str] = []
    reporter.write_document(report, parts.append)
    return "".join(parts)
