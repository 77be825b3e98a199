"""`--reporter junit[=FILE]`: JUnit XML, a testsuite per eval file (and agent), a testcase per test."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from itertools import groupby
from pathlib import Path

from agent_health.model import RunReport, TestResult
from agent_health.reporters.base import Reporter
from agent_health.stores.atomic import write_atomic


def _details(r: TestResult) -> str:
    lines = [
        f"{'PASS' if s.passed else 'SKIP' if s.skipped else 'ERR ' if s.errored else 'FAIL'} "
        f"[{s.kind}/{s.role}] {s.name}" + (f": {s.reasoning}" if s.reasoning else "")
        for s in r.signals
    ]
    return "\n".join(lines)


def to_junit(report: RunReport) -> ET.Element:
    root = ET.Element(
        "testsuites",
        name="agent-health",
        tests=str(len(report.results)),
        failures=str(sum(r.status == "failed" for r in report.results)),
        errors=str(sum(r.status == "errored" for r in report.results)),
        time=f"{(report.finished_at - report.started_at):.3f}",
    )
    key = lambda r: (r.agent, r.source_file)  # noqa: E731
    for (agent, file), group in groupby(sorted(report.results, key=key), key=key):
        results = list(group)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{file} [{agent}]",
            tests=str(len(results)),
            failures=str(sum(r.status == "failed" for r in results)),
            errors=str(sum(r.status == "errored" for r in results)),
            time=f"{sum(r.duration_ms for r in results) / 1000:.3f}",
        )
        for r in results:
            case = ET.SubElement(
                suite,
                "testcase",
                name=r.name,
                classname=r.suite,
                file=r.source_file,
                time=f"{r.duration_ms / 1000:.3f}",
            )
            props = ET.SubElement(case, "properties")
            for name, value in (
                ("agent", r.agent),
                ("test_id", r.test_id),
                ("score", r.score),
                ("total_tokens", r.usage.total_tokens),
                ("judge_tokens", r.judge_usage.total_tokens),
                ("cost_usd", r.cost_usd),
                ("evaluation_type", r.evaluation_type),
                ("pass_at_k", r.pass_at_k),
                ("run_id", r.run_id),
            ):
                if value is not None:
                    ET.SubElement(props, "property", name=name, value=str(value))
            if r.status == "failed":
                ET.SubElement(case, "failure", message=r.error or "failed", type="AssertionError").text = _details(r)
            elif r.status == "errored":
                ET.SubElement(case, "error", message=r.error or "errored", type="InfrastructureError").text = _details(
                    r
                )
    for err in report.load_errors:
        suite = ET.SubElement(root, "testsuite", name="load errors", tests="1", failures="0", errors="1")
        case = ET.SubElement(suite, "testcase", name=err.split(":", 1)[0], classname="load")
        ET.SubElement(case, "error", message=err, type="EvalFileError")
    return root


class JunitReporter(Reporter):
    def __init__(self, path: str | None = None):
        self.path = path

    def finish(self, report: RunReport) -> None:
        tree = to_junit(report)
        ET.indent(tree)
        text = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(tree, encoding="unicode") + "\n"
        if self.path:
            write_atomic(Path(self.path), text)
        else:
            sys.stdout.write(text)
