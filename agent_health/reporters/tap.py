"""`--reporter tap[=FILE]`: TAP version 14 (https://testanything.org/tap-version-14-specification.html).

One test point per result as it finishes (`ok` when passed, `not ok` when failed or errored, with
a YAML diagnostic block: status, agent, file, line, message), one `# SKIP` point per test never
run, the plan `1..N` last (allowed by TAP 14 when the count is not known up front), then comment
lines with the totals. Nothing is kept per result.
"""

from __future__ import annotations

from typing import Any

import yaml

from agent_health.model import EvalRun, RunReport, TestResult
from agent_health.reporters.json_report import _Streamed
from agent_health.reporters.summary import cost_text, tokens_text


def _description(text: str) -> str:
    """A test point's description: one line, `#` escaped (it would start a directive)."""
    return " ".join(text.split()).replace("\\", "\\\\").replace("#", "\\#")


def _yaml_block(doc: dict[str, Any]) -> str:
    """A TAP 14 YAML diagnostic: `---` and `...` indented by 2 spaces, under the test point."""
    body = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)
    return "".join(f"  {line}\n" for line in ["---", *body.splitlines(), "..."])


class TapReporter(_Streamed):
    """TAP version 14, streamed."""

    kind = "tap"
    atomic = True
    _count = 0

    def begin(self, run: EvalRun) -> None:
        self._out.open()
        self._out.write("TAP version 14\n")

    def result(self, result: TestResult) -> None:
        self._count += 1
        ok = result.status == "passed"
        text = f"{'ok' if ok else 'not ok'} {self._count} - {_description(f'{result.test_id} [{result.agent}]')}\n"
        if not ok:
            diag: dict[str, Any] = {"status": result.status, "agent": result.agent, "file": result.source_file}
            if result.line:
                diag["line"] = result.line
            if result.score is not None:
                diag["score"] = result.score
            if result.error:
                diag["message"] = str(result.error)
            text += _yaml_block(diag)
        self._out.write(text)

    def finish(self, report: RunReport) -> None:
        lines = []
        for t in report.not_run_tests:
            self._count += 1
            lines.append(f"ok {self._count} - {_description(f'{t.test_id} [{t.agent}]')} # SKIP not run: {t.reason}")
        lines.append(f"1..{self._count}")
        for s in report.summaries:
            lines.append(f"# {s.agent}: {s.passed} passed, {s.failed} failed, {s.errored} errored ({s.total} total)")
        lines.append(f"# Tokens: {tokens_text(report.summaries)}")
        lines.append(f"# Est. cost: {cost_text(report.summaries)}")
        lines += [f"# load error: {_description(err)}" for err in report.load_errors]
        self._out.write("\n".join(lines) + "\n")
        self._out.close()
