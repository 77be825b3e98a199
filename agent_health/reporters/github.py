"""`--reporter github`: what a GitHub Actions job shows. One `::error` workflow command per failed
or errored test on stdout (an annotation on its eval file and line), and a Markdown job summary
appended to the file `$GITHUB_STEP_SUMMARY` names (outside Actions, where it is unset, no summary).

It keeps only the failed and errored results' names and messages (for the summary's list), never
whole results. Commands are escaped as GitHub's toolkit escapes them (actions/toolkit
`core/src/command.ts`), so a message cannot end its annotation or inject another command.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from agent_health.model import RunReport, TestResult
from agent_health.reporters.base import Reporter, ReportError, write_stdout
from agent_health.reporters.summary import cost_text, tokens_text

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
_LISTED = 50  # failed tests listed in the job summary; the annotations name every one
_MESSAGE_CHARS = 1000  # per annotation: GitHub shows a short message, the JSON report keeps it all


def escape_data(text: str) -> str:
    """A command's message: `%`, CR and LF escaped (toolkit `escapeData`)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value: as a message, plus `:` and `,` (toolkit `escapeProperty`)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(result: TestResult, file: str) -> str:
    """The `::error file=...,line=...,title=...::message` line of one failed or errored test."""
    props = {"file": file}
    if result.line:
        props["line"] = str(result.line)
    props["title"] = f"{result.status}: {result.name} ({result.agent})"
    message = (result.error or result.status).strip() or result.status
    if len(message) > _MESSAGE_CHARS:
        message = message[: _MESSAGE_CHARS - 3] + "..."
    prop_text = ",".join(f"{k}={escape_property(v)}" for k, v in props.items())
    return f"::error {prop_text}::{escape_data(message)}"


# Markdown's punctuation that can make a link, an image, emphasis, code or a table cell within a
# line; each is written with a backslash, which GitHub's Markdown (CommonMark) shows as the character.
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")


def _cell(text: str, limit: int | None = None) -> str:
    """Text from a result (a name, an error, agent output quoted in it) as inert Markdown: one line,
    cut at `limit` characters, HTML escaped (`<script>` and `<img onerror>` show as text; GitHub
    would otherwise render the HTML it allows) and Markdown punctuation escaped (no link, image or
    table cell can be made), so it reads as it was written."""
    line = " ".join(text.split())
    if limit is not None:
        line = line[:limit]
    return _MARKDOWN.sub(r"\\\1", html.escape(line, quote=False))


def _code(text: str) -> str:
    """`text` as an inline code span: shown as written, whatever it holds (CommonMark: a fence of
    more backticks than any run inside it, padded when it starts or ends with one)."""
    line = " ".join(text.split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


class GithubReporter(Reporter):
    """Annotations on stdout as tests fail, the job summary at the end."""

    keeps_results = False
    name = "github"

    def __init__(self, path: str | None = None):
        if path:  # stdout is the channel GitHub reads commands from: there is no FILE to give
            raise ReportError(
                f"--reporter github={path}: the github reporter takes no FILE; it writes annotations to "
                f"stdout and the job summary to ${SUMMARY_ENV}"
            )
        self.workspace = Path(os.environ.get("GITHUB_WORKSPACE") or ".").resolve()
        self.summary_path = os.environ.get(SUMMARY_ENV) or None
        self._failed: list[tuple[str, str, str, str]] = []  # agent, test id, status, message
        self._more = 0

    def file_of(self, result: TestResult) -> str:
        """The eval file as a path from the repository root (GITHUB_WORKSPACE, else here)."""
        # eval files are named relative to the eval root; GitHub wants paths from the repository root
        path = (Path(self.eval_root or ".") / result.source_file).resolve()
        try:
            return path.relative_to(self.workspace).as_posix()
        except ValueError:
            return result.source_file

    def result(self, result: TestResult) -> None:
        if result.status == "passed":
            return
        write_stdout(annotation(result, self.file_of(result)) + "\n")
        if len(self._failed) < _LISTED:
            self._failed.append((result.agent, result.test_id, result.status, result.error or ""))
        else:
            self._more += 1

    def finish(self, report: RunReport) -> None:
        if self.summary_path is None:
            return
        try:  # appended, as GitHub expects: earlier steps' summaries stay
            with open(self.summary_path, "a", encoding="utf-8") as fh:
                fh.write(job_summary(report, self._failed, self._more))
        except OSError as exc:
            raise ReportError(
                f"--reporter github: cannot write the job summary {self.summary_path}: {exc.strerror or exc}"
            ) from None


def job_summary(report: RunReport, failed: list[tuple[str, str, str, str]], more: int = 0) -> str:
    """The Markdown job summary: a table per agent version, totals, then the failed tests."""
    lines = ["## agent-health results", ""]
    if report.shard is not None:
        lines += [f"Shard {report.shard} of the selected tests.", ""]
    lines += [
        "| agent | tests | passed | failed | errored | not run | pass rate | score | tokens (prompt / completion) "
        "| cost (agent + judge) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for s in report.summaries:
        lines.append(
            f"| {_cell(s.agent)} | {s.total} | {s.passed} | {s.failed} | {s.errored} | {s.not_run} | "
            + ("-" if s.pass_rate is None else f"{s.pass_rate:.0%}")
            + " | "
            + ("-" if s.mean_score is None else f"{s.mean_score:.2f}")
            + f" | {tokens_text([s])} | {cost_text([s])} |"
        )
    lines += ["", f"**Tokens:** {tokens_text(report.summaries)}  ", f"**Est. cost:** {cost_text(report.summaries)}"]
    for err in report.load_errors:
        lines.append(f"- :x: load error: {_cell(err)}")
    if failed:
        lines += ["", f"### Failed or errored ({len(failed) + more})", ""]
        lines += [
            f"- **{status}** {_code(tid)} ({_cell(agent)}): {_cell(msg, 300)}" for agent, tid, status, msg in failed
        ]
        if more:
            lines.append(f"- ... and {more} more (the annotations name every one)")
    if report.not_run:
        lines += ["", f"{report.not_run} test(s) not run ({report.not_run_reason or 'stopped early'})."]
    return "\n".join(lines) + "\n\n"
