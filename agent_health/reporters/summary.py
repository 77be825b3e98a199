"""The default reporter: live progress on a terminal, plain lines otherwise, then a final table
with counts, duration, tokens and estimated cost (see agent_health.pricing)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from agent_health.model import RunReport, TestResult
from agent_health.reporters.base import Reporter

_MARK = {"passed": "✓", "failed": "✗", "errored": "!"}
_STYLE = {"passed": "green", "failed": "red", "errored": "yellow"}


def _fmt_cost(cost: float) -> str:
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


class SummaryReporter(Reporter):
    """Progress and a final summary table on `stream` (stderr when another reporter uses stdout)."""

    def __init__(self, stream: TextIO | None = None, verbose: bool = False, color: bool | None = None):
        from rich.console import Console

        self.stream = stream or sys.stdout
        self.console = Console(
            file=self.stream, highlight=False, soft_wrap=True, force_terminal=color, no_color=color is False
        )
        if not self.console.is_terminal:  # logs and CI: wide enough that the table never truncates
            self.console.width = 160
        self.verbose = verbose
        self.live = self.console.is_terminal
        self._progress: Any = None
        self._task = None
        self._counts = {"passed": 0, "failed": 0, "errored": 0}

    def start(self, agent: str, total: int) -> None:
        self._counts = {"passed": 0, "failed": 0, "errored": 0}
        self.console.print(f"[bold]Running {total} test(s) against {agent}[/bold]")
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[counts]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._task = self._progress.add_task(agent, total=total, counts=self._count_text())
            self._progress.start()

    def _count_text(self) -> str:
        c = self._counts
        return f"[green]{c['passed']} passed[/] [red]{c['failed']} failed[/] [yellow]{c['errored']} errored[/]"

    def result(self, r: TestResult) -> None:
        self._counts[r.status] += 1
        line = (
            f"[{_STYLE[r.status]}]{_MARK[r.status]} {r.status:<7}[/] {r.test_id}"
            + (f"  score={r.score:.2f}" if r.score is not None else "")
            + (f"  [dim]{r.error}[/dim]" if r.error and r.status != "passed" else "")
        )
        if self._progress is not None:
            self._progress.update(self._task, advance=1, counts=self._count_text())
            if r.status != "passed" or self.verbose:
                self._progress.console.print(line)
        elif r.status != "passed" or self.verbose:
            self.console.print(line)
        if self.verbose:
            for s in r.signals:
                mark = "·" if s.skipped else "✓" if s.passed else "✗" if s.passed is False else "!"
                self.console.print(
                    f"    {mark} [{s.kind}/{s.role}] {s.name}"
                    + (f" — {s.reasoning}" if s.reasoning and not s.passed else "")
                )

    def agent_done(self, agent: str) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def finish(self, report: RunReport) -> None:
        from rich.table import Table

        for err in report.load_errors:
            self.console.print(f"[red]load error[/red] {err}")
        for err in report.hook_errors:
            self.console.print(f"[yellow]hook error[/yellow] {err}")
        table = Table(title="agent-health results", title_justify="left")
        for col in (
            "agent",
            "tests",
            "passed",
            "failed",
            "errored",
            "pass rate",
            "score",
            "tokens",
            "cost",
            "duration",
        ):
            table.add_column(col, justify="left" if col == "agent" else "right")
        for s in report.summaries:
            table.add_row(
                s.agent,
                str(s.total),
                f"[green]{s.passed}[/]",
                f"[red]{s.failed}[/]",
                f"[yellow]{s.errored}[/]",
                "-" if s.pass_rate is None else f"{s.pass_rate:.0%}",
                "-" if s.mean_score is None else f"{s.mean_score:.2f}",
                f"{s.total_tokens:,}" + (f" (+{s.judge_tokens:,} judge)" if s.judge_tokens else ""),
                _fmt_cost(s.cost_usd),
                f"{s.duration_ms / 1000:.2f}s",
            )
        self.console.print(table)
        if report.not_run:
            self.console.print(
                f"[yellow]--fail-fast: stopped after the first failure; {report.not_run} test(s) not run[/yellow]"
            )
        self.console.print(
            f"Total {report.finished_at - report.started_at:.2f}s. Errored tests are excluded "
            "from the pass rate. Cost is an estimate from the per-model price table."
        )
