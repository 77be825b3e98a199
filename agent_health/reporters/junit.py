"""`--reporter junit[=FILE]`: JUnit XML, a testsuite per eval file (and agent), a testcase per test.

The output validates against the common JUnit schema (Jenkins xunit's junit-10.xsd, which the
other CI readers accept too): properties only at testsuite level (per-suite figures), per-test
figures in the testcase's `system-out`, and every text and attribute reduced to what XML 1.0 may
hold (ANSI colour codes removed, other forbidden characters written as visible escapes).
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from itertools import groupby
from pathlib import Path

from agent_health.files import write_atomic
from agent_health.model import RunReport, RunSummary, TestResult
from agent_health.reporters.base import Reporter
from agent_health.reporters.text import xml_safe


def _details(r: TestResult) -> str:
    lines = [
        f"{'PASS' if s.passed else 'SKIP' if s.skipped else 'ERR ' if s.errored else 'FAIL'} "
        f"[{s.kind}/{s.role}] {s.name}" + (f": {s.reasoning}" if s.reasoning else "")
        for s in r.signals
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
    for el in tree.iter():
        el.attrib = {k: xml_safe(v) for k, v in el.attrib.items()}
        if el.text:
            el.text = xml_safe(el.text)


def to_junit(report: RunReport) -> ET.Element:
    root = ET.Element(
        "testsuites",
        name="agent-health",
        tests=str(len(report.results)),
        failures=str(sum(r.status == "failed" for r in report.results)),
        errors=str(sum(r.status == "errored" for r in report.results)),
        time=f"{max(0.0, report.finished_at - report.started_at):.3f}",
    )
    key = lambda r: (r.agent, r.source_file)  # noqa: E731
    for (agent, file), group in groupby(sorted(report.results, key=key), key=key):
        results = list(group)
        summary = RunSummary.of(agent, results)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{file} [{agent}]",
            tests=str(len(results)),
            failures=str(summary.failed),
            errors=str(summary.errored),
            skipped="0",
            time=f"{sum(r.duration_ms for r in results) / 1000:.3f}",
            file=file,
        )
        _properties(
            suite,
            [
                ("agent", agent),
                ("suite", results[0].suite),
                ("pass_rate", summary.pass_rate),
                ("mean_score", summary.mean_score),
                ("total_tokens", summary.total_tokens),
                ("judge_tokens", summary.judge_tokens),
                ("cost_usd", summary.cost_usd),
            ],
        )
        for r in results:
            case = ET.SubElement(suite, "testcase", name=r.name, classname=r.suite, time=f"{r.duration_ms / 1000:.3f}")
            if r.status == "failed":
                ET.SubElement(case, "failure", message=r.error or "failed", type="AssertionError").text = _details(r)
            elif r.status == "errored":
                ET.SubElement(case, "error", message=r.error or "errored", type="InfrastructureError").text = _details(
                    r
                )
            ET.SubElement(case, "system-out").text = _figures(r)
    for err in report.load_errors:
        suite = ET.SubElement(root, "testsuite", name="load errors", tests="1", failures="0", errors="1")
        case = ET.SubElement(suite, "testcase", name=err.split(":", 1)[0], classname="load")
        ET.SubElement(case, "error", message=err, type="EvalFileError")
    _sanitize(root)
    return root


def junit_xml(report: RunReport) -> str:
    """The whole JUnit document as text (well-formed XML 1.0 whatever the results hold)."""
    tree = to_junit(report)
    ET.indent(tree)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(tree, encoding="unicode") + "\n"


class JunitReporter(Reporter):
    def __init__(self, path: str | None = None):
        self.path = path

    def finish(self, report: RunReport) -> None:
        text = junit_xml(report)
        if self.path:
            write_atomic(Path(self.path), text)
        else:
            sys.stdout.write(text)
