"""The default reporter: live progress on a terminal, plain lines otherwise, then a final table
with counts, duration, tokens and estimated cost (see agent_health.pricing). It keeps counts
only, never the results."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

from rich.markup import escape

from agent_health.analysis.metrics import shown_signals
from agent_health.lazy import deferred
from agent_health.model import EvalRun, RunReport, RunSummary, Signal, TestResult
from agent_health.reporters.base import Reporter, closed_output
from agent_health.reporters.text import terminal_safe

# the progress bar and the final table load when first drawn
if TYPE_CHECKING:
    import rich.console as rich_console
    import rich.progress as rich_progress
    import rich.table as rich_table
else:
    rich_console = deferred("rich.console")
    rich_progress = deferred("rich.progress")
    rich_table = deferred("rich.table")


_MARK = {"passed": "✓", "failed": "✗", "errored": "!"}
_STYLE = {"passed": "green", "failed": "red", "errored": "yellow"}
_NOT_RUN_SHOWN = 50  # not-run tests listed without -v; the JSON, JUnit and HTML reports list every one
_EVIDENCE_CHARS = 120  # per value on a -v line; the JSON and HTML reports keep the whole evidence


def _fmt_cost(cost: float) -> str:
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


def _count(n: int) -> str:
    """A token count the way the field plan prints it: 1.2M, 340K, 917."""
    for size, unit in ((1_000_000, "M"), (1_000, "K")):
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + unit
    return str(n)


def tokens_text(summaries: Iterable[RunSummary]) -> str:
    """Agent + judge tokens, prompt and completion apart: `1.2M prompt / 340K completion`."""
    ss = list(summaries)
    prompt = sum(s.input_tokens + s.judge_input_tokens for s in ss)
    completion = sum(s.output_tokens + s.judge_output_tokens for s in ss)
    unreported = sum(s.unreported for s in ss)
    unknown = f" + unknown for {unreported} agent run(s) that reported no usage" if unreported else ""
    return f"{_count(prompt)} prompt / {_count(completion)} completion{unknown}"


def cost_text(summaries: Iterable[RunSummary]) -> str:
    """Agent and judge cost apart, then the sum: `$4.82 (agent) + $1.20 (judge) = $6.02`."""
    ss = list(summaries)
    total = sum(s.cost_usd for s in ss)
    judge = sum(s.judge_cost_usd for s in ss)
    unpriced = sum(s.unpriced for s in ss)
    text = f"{_fmt_cost(max(total - judge, 0.0))} (agent) + {_fmt_cost(judge)} (judge) = {_fmt_cost(total)}"
    return text + (f" + unknown for {unpriced} result(s)" if unpriced else "")


def _value_text(value: Any) -> str:
    """One evidence value on one line, cut at _EVIDENCE_CHARS: a bound such as `{"<": 20000}` as
    `< 20000`, anything else as JSON (text quoted, so `"17"` and `17` differ)."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("<", ">", "<=", ">="):
        op, limit = next(iter(value.items()))  # to_be_less_than / to_be_greater_than
        text = f"{op} {limit}"
    else:
        text = json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))
    return text if len(text) <= _EVIDENCE_CHARS else text[: _EVIDENCE_CHARS - 3] + "..."


def signal_text(s: Signal) -> str:
    """A signal on a -v line: its name, then an expectation's actual and expected values, a metric's
    value or a judge's score, then the reasoning of what did not pass."""
    parts = [s.name]
    evidence = s.evidence or {}
    if s.kind == "deterministic" and ("actual" in evidence or "expected" in evidence):
        parts.append(f"actual {_value_text(evidence.get('actual'))}, expected {_value_text(evidence.get('expected'))}")
    elif s.kind == "metric" and s.value is not None:
        parts[0] += f" = {s.value:g}"
    elif s.kind == "judge" and s.score is not None and not s.skipped:
        parts.append(f"score {s.score:.2f}")
    if s.reasoning and not s.passed:
        parts.append(s.reasoning)
    return " — ".join(parts)


class SummaryReporter(Reporter):
    """Progress and a final summary table on `stream` (stderr when another reporter uses stdout)."""

    keeps_results = False
    name = "summary"

    def __init__(self, stream: TextIO | None = None, verbose: bool = False, color: bool | None = None):
        self.stream = stream or sys.stdout
        self.console = rich_console.Console(
            file=self.stream, highlight=False, soft_wrap=True, force_terminal=color, no_color=color is False
        )
        # rich's own answer to a closed pipe is SystemExit, which would end the thread calling
        # the reporters (and leave the run waiting for it): end this reporter instead
        self.console.on_broken_pipe = self._closed  # type: ignore[method-assign]
        if not self.console.is_terminal:  # logs and CI: wide enough that the table never truncates
            self.console.width = 160
        self.verbose = verbose
        self.live = self.console.is_terminal
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        self._counts: dict[str, dict[str, int]] = {}

    def _closed(self) -> None:
        self.console.quiet = True
        raise closed_output(self.stream)

    def begin(self, run: EvalRun) -> None:
        # said at once, and again under the final table: the tests of these files never run
        for err in run.load_errors:
            self.console.print(f"[red]load error[/red] {terminal_safe(err)}")

    def start(self, agent: str, total: int) -> None:
        self._counts[agent] = {"passed": 0, "failed": 0, "errored": 0}
        self.console.print(f"[bold]Running {total} test(s) against {agent}[/bold]")
        if not self.live:
            return
        if self._progress is None:
            self._progress = rich_progress.Progress(
                rich_progress.TextColumn("{task.description}"),
                rich_progress.BarColumn(),
                rich_progress.MofNCompleteColumn(),
                rich_progress.TextColumn("{task.fields[counts]}"),
                rich_progress.TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
        self._tasks[agent] = self._progress.add_task(agent, total=total, counts=self._count_text(agent))

    def _count_text(self, agent: str) -> str:
        c = self._counts[agent]
        return f"[green]{c['passed']} passed[/] [red]{c['failed']} failed[/] [yellow]{c['errored']} errored[/]"

    def result(self, r: TestResult) -> None:
        counts = self._counts.setdefault(r.agent, {"passed": 0, "failed": 0, "errored": 0})
        counts[r.status] += 1
        if self._progress is not None and r.agent in self._tasks:
            self._progress.update(self._tasks[r.agent], advance=1, counts=self._count_text(r.agent))
        if r.status != "passed" or self.verbose:  # the line is made only when it is printed
            several = len(self._counts) > 1
            self.console.print(
                f"[{_STYLE[r.status]}]{_MARK[r.status]} {r.status:<7}[/] {terminal_safe(r.test_id)}"
                + (f"  [dim]{terminal_safe(r.agent)}[/dim]" if several else "")
                + (f"  score={r.score:.2f}" if r.score is not None else "")
                + (f"  [dim]{terminal_safe(r.error)}[/dim]" if r.error and r.status != "passed" else "")
            )
        if self.verbose:
            for s in shown_signals(r):
                mark = "!" if s.errored else "✓" if s.passed else "✗" if s.passed is False else "·"
                self.console.print(f"    {mark} \\[{s.kind}/{s.role}] {terminal_safe(signal_text(s))}")

    def _stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def finish(self, report: RunReport) -> None:
        self._stop_progress()
        for err in report.hook_errors:
            self.console.print(f"[yellow]hook error[/yellow] {terminal_safe(err)}")
        title = "agent-health results"
        if report.load_errors:  # the table counts only what loaded: say so where the eye lands
            title += f" [red](not counted: {len(report.load_errors)} load error(s), below)[/red]"
        table = rich_table.Table(title=title, title_justify="left")
        columns = ["agent", "tests", "passed", "failed", "errored", "pass rate", "score", "tokens", "cost", "duration"]
        columns[7:9] = ["tokens (prompt / completion)", "cost (agent + judge)"]
        if report.not_run:
            columns.insert(5, "not run")
        for col in columns:
            table.add_column(col, justify="left" if col == "agent" else "right")
        for s in report.summaries:
            row = [
                s.agent,
                str(s.total),
                f"[green]{s.passed}[/]",
                f"[red]{s.failed}[/]",
                f"[yellow]{s.errored}[/]",
                "-" if s.pass_rate is None else f"{s.pass_rate:.0%}",
                "-" if s.mean_score is None else f"{s.mean_score:.2f}",
                tokens_text([s]),
                cost_text([s]),
                f"{s.duration_ms / 1000:.2f}s",
            ]
            if report.not_run:
                row.insert(5, f"[yellow]{s.not_run}[/]")
            table.add_row(*row)
        self.console.print(table)
        if report.load_errors:
            self.console.print(
                f"[bold red]✗ {len(report.load_errors)} load error(s): these eval files (or tests) did not load "
                "and none of their tests ran[/bold red]"
            )
            for err in report.load_errors:
                self.console.print(f"  [red]{terminal_safe(err)}[/red]")
        for warning in report.warnings:  # a judge the calibration gate refused: its verdicts did not gate
            self.console.print(f"[yellow]warning: {escape(terminal_safe(warning))}[/yellow]")
        if report.not_run:
            per_agent = ", ".join(f"{s.agent}: {s.not_run}" for s in report.summaries if s.not_run)
            why = f", {report.not_run_reason}" if report.not_run_reason else ""
            self.console.print(
                f"[yellow]stopped early: {report.not_run} test(s) not run ({per_agent}){terminal_safe(why)}[/yellow]"
            )
            shown = report.not_run_tests[:_NOT_RUN_SHOWN] if not self.verbose else report.not_run_tests
            for t in shown:
                self.console.print(f"[yellow]- not run[/yellow] {terminal_safe(t.test_id)}  [dim]{t.reason}[/dim]")
            if len(report.not_run_tests) > len(shown):
                self.console.print(f"[dim]  ... and {len(report.not_run_tests) - len(shown)} more (-v lists all)[/dim]")
        # the totals the field plan asks for: prompt and completion apart, agent and judge cost apart
        self.console.print(f"Tokens: {tokens_text(report.summaries)} (agent + judge)")
        self.console.print(f"Est. cost: {escape(cost_text(report.summaries))}")
        if report.budget is not None:
            self.console.print(terminal_safe(report.budget.describe()))
        if report.skipped:  # --only: what did not run because its stored result is up to date
            per_agent = ", ".join(f"{s.agent}: {s.skipped}" for s in report.summaries if s.skipped)
            self.console.print(f"{report.skipped} skipped as up to date ({terminal_safe(per_agent)})")
        self.console.print(
            f"Total {report.finished_at - report.started_at:.2f}s. Errored tests are excluded "
            "from the pass rate. Cost is an estimate from the per-model price table."
        )
        if report.eval_run_id:
            self.console.print(f"[dim]Run {report.eval_run_id}[/dim]")
