"""`--reporter json[=FILE]` (the versioned RunReport document) and `--reporter jsonl[=FILE]`
(one TestResult per line as it finishes, then a last line holding the RunReport without results).

Both stream: nothing is kept per result. The JSON document goes to a temporary file next to FILE
that replaces it when the run ends (a reader never sees half a report); JSON lines are written one
whole line per write, so a run killed with SIGKILL leaves a valid file of every result reported
before the kill (`read_jsonl` reads it back, with or without its summary line).
"""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import ValidationError

from agent_health.model import EvalRun, RunReport, RunSummary, TestResult
from agent_health.reporters.base import Reporter
from agent_health.reporters.output import ReportOutput

# Written before the results (known when the run starts) and as the results array; every other
# field of RunReport is the tail, written when the run ends. Derived, not listed, so a field added
# to RunReport can never be left out of the streamed report (`skipped` once was).
_HEAD_FIELDS = ("schema_version", "eval_run_id", "started_at", "results")
_TAIL_FIELDS = tuple(name for name in RunReport.model_fields if name not in _HEAD_FIELDS)


def _tail(report: RunReport) -> dict[str, Any]:
    return report.model_dump(mode="json", include=set(_TAIL_FIELDS))


class _Streamed(Reporter):
    """A report written to `path` (stdout without one) as results arrive."""

    keeps_results = False
    kind = ""
    atomic = False

    def __init__(self, path: str | None = None):
        self.path = path
        self.name = f"{self.kind}={path}" if path else self.kind
        self._out = ReportOutput(self.name, path, atomic=self.atomic)

    def abort(self) -> None:
        self._out.discard()


class JsonReporter(_Streamed):
    """The RunReport JSON document, streamed: the results array is written as results finish."""

    kind = "json"
    atomic = True
    _count = 0

    def begin(self, run: EvalRun) -> None:
        self._out.open()
        head = {"schema_version": run.schema_version, "eval_run_id": run.id, "started_at": run.started_at}
        self._out.write(json.dumps(head)[:-1] + ', "results": [')

    def result(self, result: TestResult) -> None:
        self._out.write(("," if self._count else "") + "\n" + result.json_text())
        self._count += 1

    def finish(self, report: RunReport) -> None:
        tail = json.dumps(_tail(report))
        self._out.write("\n], " + tail[1:] + "\n")
        self._out.close()


class JsonLinesReporter(_Streamed):
    """One TestResult JSON per line as each finishes, then the RunReport (no results) on the last."""

    kind = "jsonl"

    def begin(self, run: EvalRun) -> None:
        self._out.open()

    def result(self, result: TestResult) -> None:
        self._out.write(result.json_text() + "\n")

    def finish(self, report: RunReport) -> None:
        self._out.write(report.model_dump_json(exclude={"results"}) + "\n")
        self._out.close()


def read_jsonl(path: str | os.PathLike[str]) -> RunReport:
    """The RunReport of a `--reporter jsonl` file. A file cut short (the run was killed) gives
    every complete result line, summaries computed from them and `finished_at` at the end of its
    last result; a torn last line is skipped."""
    results: list[TestResult] = []
    tail: RunReport | None = None
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                continue  # the torn last line of a killed run
            try:
                if "summaries" in doc:
                    tail = RunReport.model_validate(doc)
                else:
                    results.append(TestResult.model_validate(doc))
            except ValidationError:
                continue
    if tail is not None:
        return tail.model_copy(update={"results": results})
    agents = list(dict.fromkeys(r.agent for r in results))
    started = min((r.started_at for r in results), default=0.0)
    finished = max((r.started_at + r.duration_ms / 1000 for r in results), default=started)
    return RunReport(
        eval_run_id=results[0].eval_run_id if results else None,
        started_at=started,
        finished_at=finished,
        summaries=[RunSummary.of(a, (r for r in results if r.agent == a)) for a in agents],
        results=results,
    )
