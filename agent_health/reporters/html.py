"""Self-contained HTML pages: the run report (`--reporter html=FILE`, `agent-health report`) and the
comparison page (`agent-health compare --html FILE`).

One file each, built with jinja2 templates, with its CSS and JS inline and a Content-Security-Policy
that allows nothing else (no network when opened). The test table is rendered on the server; each
test's details (trajectory, signals, verdicts, metrics, insights, trials, provenance) travel as JSON
in a `<script type="application/json">` block that the page parses and turns into DOM nodes, with
text only, when the test is opened. Agent output is hostile: the templates autoescape, and JSON
blocks escape `<`, `>` and `&`, so nothing in a result can close a tag or run.

Memory stays flat in the number of tests: the builder spools each test's details to a temporary
file as results arrive and keeps only summaries; the page is streamed to disk.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from agent_health.analysis.calibration import criterion_of
from agent_health.analysis.rollup import SuiteRollup, rollup
from agent_health.errors import UsageError
from agent_health.files import open_atomic, remove_stale_temps
from agent_health.model import BudgetSpend, EvalRun, JudgeIdentity, NotRunTest, RunReport, RunSummary, TestResult
from agent_health.model.calibration import judge_key
from agent_health.reporters.base import Reporter, ReportError, closed_output
from agent_health.stores.summary import ResultSummary

if TYPE_CHECKING:
    from agent_health.analysis.compare import Comparison

import jinja2

_STATUS_ORDER = {"errored": 0, "failed": 1, "passed": 2}
# The ids of details blocks and their rows: "d<n>".
_SCRIPT_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no `</script>`, `<!--` or `&` can appear in it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).translate(_SCRIPT_ESCAPES)


def result_details(result: TestResult) -> dict[str, Any]:
    """Everything the page shows about one test, as JSON. Raw protocol events are left out (they
    repeat the trajectory and can be large); every other field, provenance included when results
    carry it, goes through, so new fields show up without a template change."""
    exclude: dict[str, Any] = {"run": {"raw_events"}}
    if result.trials:
        exclude["trials"] = {"__all__": {"run": {"raw_events"}}}
    out = result.model_dump(mode="json", exclude=exclude)
    # what a human label of a verdict names (the labels file's criterion and judge fields)
    for data, signal in zip(out.get("signals") or [], result.signals):
        if signal.kind == "judge":
            data["criterion"] = criterion_of(signal)
            raw = (signal.evidence or {}).get("provenance")
            if isinstance(raw, dict):
                data["judge_key"] = judge_key(JudgeIdentity.model_validate(raw))
    return out


def anchor(result: ResultSummary | TestResult, many_agents: bool) -> str:
    """A test's deep-link key: its id, prefixed with its agent version when a page holds several."""
    return f"{result.agent}/{result.test_id}" if many_agents else result.test_id


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("agent_health.reporters", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(pct=_pct, num=_num, usd=_usd, ms=_ms, when=_when, signed=_signed)
    return env


def _asset(name: str) -> str:
    return (Path(__file__).parent / "templates" / name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _assets(*scripts: str) -> dict[str, str]:
    """Inline CSS and JS, and a Content-Security-Policy that allows exactly them: an injected
    script would not run and nothing is fetched from anywhere."""
    css = _asset("report.css")
    js = "\n".join(_asset(s) for s in scripts)
    csp = (
        f"default-src 'none'; style-src {_csp_hash(css)}; script-src {_csp_hash(js)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return {"css": css, "js": js, "csp": csp}


# -- formatting filters (None shows as a dash) -------------------------------------------------
def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def _signed(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else "0" if v == 0 else f"{v:+.{digits}g}"


def _usd(v: float | None) -> str:
    return "-" if v is None else f"${v:.4f}" if v >= 0.01 or v == 0 else f"${v:.6f}"


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f} ms" if abs(v) < 1000 else f"{v / 1000:.2f} s"


def _when(ts: float | None) -> str:
    return "-" if not ts else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


@contextlib.contextmanager
def _atomic_text(path: Path) -> Iterator[IO[str]]:
    """Stream the page into `path` atomically (see `open_atomic`); a path that cannot be written
    is one clear error naming it."""
    try:
        remove_stale_temps(Path(os.path.realpath(path)))  # left by a run killed while writing this page
        with open_atomic(path, fsync=False) as fh:
            yield fh
    except OSError as exc:
        raise UsageError(f"cannot write HTML report {path}: {exc.strerror or exc}") from exc


class ReportBuilder:
    """Collects results (from a run as it goes, a stored run, or a JSON report) and writes the page."""

    def __init__(self) -> None:
        self._spool = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 - closed in write()/close()
        self._rows: list[tuple[int, ResultSummary, str]] = []  # (details index, summary, name)

    def add(self, result: TestResult) -> None:
        """One result: its summary stays in memory, its details go to the spool file."""
        self._spool.write(script_json(result_details(result)) + "\n")
        self._rows.append((len(self._rows), ResultSummary.of(result), result.name))

    def extend(self, results: Iterable[TestResult]) -> ReportBuilder:
        for r in results:
            self.add(r)
        return self

    def __len__(self) -> int:
        return len(self._rows)

    def close(self) -> None:
        self._spool.close()

    def _details(self) -> Iterator[tuple[int, str]]:
        self._spool.flush()
        self._spool.seek(0)
        for n, line in enumerate(self._spool):
            yield n, line.rstrip("\n")

    def write(self, path: str | os.PathLike[str], **page: Any) -> Path:
        """Render the page to `path` (atomically: a failed render leaves any old page in place)."""
        target = Path(path)
        with _atomic_text(target) as fh:
            self.render(fh, **page)
        return target

    def render(
        self,
        out: IO[str],
        *,
        title: str = "agent-health report",
        summaries: Iterable[RunSummary] = (),
        run: EvalRun | None = None,
        started_at: float | None = None,
        finished_at: float | None = None,
        load_errors: Iterable[str] = (),
        hook_errors: Iterable[str] = (),
        warnings: Iterable[str] = (),
        source: str = "",
        not_run_tests: Iterable[NotRunTest] = (),
        budget: BudgetSpend | None = None,
    ) -> None:
        """Stream the page into `out` and release the spool."""
        summaries = list(summaries)
        by_agent: dict[str, list[ResultSummary]] = defaultdict(list)
        for _, s, _ in self._rows:
            by_agent[s.agent].append(s)
        agents = list(by_agent) or [s.agent for s in summaries]
        if not summaries or {s.agent for s in summaries} != set(by_agent):
            # RunSummary.of reads only what summaries carry (status, score, usage, cost, timings)
            summaries = [RunSummary.of(a, rs) for a, rs in by_agent.items()]
        many = len(agents) > 1
        rows = sorted(self._rows, key=lambda row: (_STATUS_ORDER.get(row[1].status, 3), row[1].suite, row[1].test_id))
        context = {
            "title": title,
            "source": source,
            "generated_at": time.time(),
            "run": run,
            "started_at": started_at if started_at is not None else (run.started_at if run else None),
            "finished_at": finished_at if finished_at is not None else (run.finished_at if run else None),
            "agents": agents,
            "many_agents": many,
            "summaries": summaries,
            "suites": _suite_rollups(by_agent),
            "labels": _label_table(by_agent),
            "all_labels": sorted({label for _, s, _ in self._rows for label in s.labels}),
            "all_suites": sorted({s.suite for _, s, _ in self._rows}),
            "rows": [
                {"i": i, "s": s, "name": name, "key": anchor(s, many), "labels_json": json.dumps(list(s.labels))}
                for i, s, name in rows
            ],
            "details": self._details(),
            "load_errors": list(load_errors),
            "hook_errors": list(hook_errors),
            "not_run_tests": list(not_run_tests),
            "budget": budget.describe() if budget is not None else None,
            # judges the calibration gate refused: their verdicts did not gate
            "warnings": list(warnings) or (list(run.warnings) if run else []),
            "settings_json": run.settings.model_dump_json(indent=1) if run else None,
            **_assets("common.js", "report.js"),
        }
        try:
            _stream(out, "report.html.j2", context)
        finally:
            self.close()


def _stream(out: IO[str], template: str, context: dict[str, Any]) -> None:
    for chunk in _environment().get_template(template).generate(**context):
        out.write(chunk)


def _suite_rollups(by_agent: dict[str, list[ResultSummary]]) -> list[SuiteRollup]:
    out = []
    for agent, summaries in by_agent.items():
        per_suite: dict[str, list[ResultSummary]] = defaultdict(list)
        for s in summaries:
            per_suite[s.suite].append(s)
        out += [rollup(rs, suite, agent) for suite, rs in sorted(per_suite.items())]
    return sorted(out, key=lambda r: (r.suite, r.agent))


def _label_table(by_agent: dict[str, list[ResultSummary]]) -> list[dict[str, Any]]:
    """One row per (label, agent version) from the rollup of that agent's whole run."""
    rows = []
    for agent, summaries in by_agent.items():
        whole = rollup(summaries, "*", agent)
        rows += [{"agent": agent, "stats": stats} for stats in whole.labels.values()]
    return sorted(rows, key=lambda r: (r["stats"].label, r["agent"]))


def write_report(
    path: str | os.PathLike[str], results: Iterable[TestResult], **page: Any
) -> Path:  # a shortcut over ReportBuilder
    """Write the HTML report of `results` (see `ReportBuilder.write` for the page options)."""
    return ReportBuilder().extend(results).write(path, **page)


def report_page(report: RunReport) -> dict[str, Any]:
    """The page options a JSON report carries (for `ReportBuilder.write`)."""
    return {
        "summaries": report.summaries,
        "started_at": report.started_at,
        "finished_at": report.finished_at,
        "load_errors": report.load_errors,
        "hook_errors": report.hook_errors,
        "not_run_tests": report.not_run_tests,
        "budget": report.budget,
        "warnings": report.warnings,
    }


def write_run_report(path: str | os.PathLike[str], report: RunReport, source: str = "") -> Path:
    """The HTML page of a `--reporter json` report."""
    return write_report(path, report.results, source=source, **report_page(report))


class HtmlReporter(Reporter):
    """`--reporter html[=FILE]`: the run's page, written when the run finishes (to stdout without
    FILE, like the other machine-readable reporters). Each result's details are spooled to a
    temporary file as it arrives, so it keeps no results in memory."""

    keeps_results = False

    def __init__(self, path: str | None = None):
        self.path = path
        self.name = f"html={path}" if path else "html"
        self.builder = ReportBuilder()

    def result(self, result: TestResult) -> None:
        self.builder.add(result)

    def finish(self, report: RunReport) -> None:
        if not len(self.builder):  # a transport that hands the results over only at the end
            self.builder.extend(report.results)
        page = report_page(report)
        if not self.path:
            try:
                self.builder.render(sys.stdout, **page)
                sys.stdout.flush()
            except BrokenPipeError:
                raise closed_output(sys.stdout) from None
            return
        try:
            self.builder.write(self.path, **page)
        except UsageError as exc:  # names the file and the cause
            raise ReportError(f"--reporter {self.name}: {exc}") from None

    def abort(self) -> None:
        self.builder.close()


# -- the comparison page -------------------------------------------------------------------------
def write_comparison(
    path: str | os.PathLike[str],
    comparison: Comparison,
    baseline: Iterable[TestResult],
    candidate: Iterable[TestResult],
    *,
    title: str | None = None,
) -> Path:
    """The comparison page: statistics, every test's flip and deltas, and for each test whose status
    changed its two runs side by side (details only for those, so the page stays small)."""
    changed = {t.test_id for t in comparison.tests if t.flip not in ("same",)}
    base = {r.test_id: r for r in baseline if r.test_id in changed}
    cand = {r.test_id: r for r in candidate if r.test_id in changed}
    rows: list[dict[str, Any]] = []
    details: list[str] = []
    for t in comparison.tests:
        entry: dict[str, Any] = {"t": t, "i": None}
        if t.test_id in changed:
            entry["i"] = len(details)
            b, c = base.get(t.test_id), cand.get(t.test_id)
            details.append(
                script_json(
                    {
                        "baseline": result_details(b) if b else None,
                        "candidate": result_details(c) if c else None,
                        "delta": t.model_dump(mode="json"),
                    }
                )
            )
        rows.append(entry)
    context = {
        "title": title or f"{comparison.baseline} -> {comparison.candidate}",
        "cmp": comparison,
        "stats": comparison.stats,
        "generated_at": time.time(),
        "rows": rows,
        "details": list(enumerate(details)),
        "flips": list(comparison.flip_counts),
        **_assets("common.js", "compare.js"),
    }
    target = Path(path)
    with _atomic_text(target) as fh:
        _stream(fh, "comparison.html.j2", context)
    return target
