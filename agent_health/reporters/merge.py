"""One report from the JSON reports of a sharded run (`agent-health run --shard i/n --reporter
json=FILE` in n CI jobs): the results joined, every figure recomputed from them, so counts, pass
rates, scores, tokens and cost are those of the same run unsharded."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from agent_health.errors import AgentHealthError
from agent_health.model import RunReport, TestResult
from agent_health.model.report import BudgetSpend, SummaryTally
from agent_health.model.validation import describe_errors
from agent_health.reporters.json_report import read_jsonl

__all__ = ["MergeError", "merge_reports", "read_report"]


class MergeError(AgentHealthError):
    """Reports that cannot be merged; the message names the file and what is wrong."""


def read_report(path: str | Path) -> RunReport:
    """A `--reporter json` report (or a `--reporter jsonl` file) from `path`."""
    p = Path(path)
    try:
        if p.suffix == ".jsonl":
            return read_jsonl(p)
        return RunReport.model_validate_json(p.read_bytes())
    except OSError as exc:
        raise MergeError(f"{p}: cannot read it: {exc.strerror or exc}") from None
    except ValidationError as exc:
        raise MergeError(f"{p}: not an agent-health JSON report ({describe_errors(exc)})") from None
    except ValueError as exc:
        raise MergeError(f"{p}: not an agent-health JSON report ({exc})") from None


def _check_shards(named: Sequence[tuple[str, RunReport]]) -> None:
    """Shard reports must be the shards of one split, each once, none missing."""
    sharded = [(name, r.shard) for name, r in named if r.shard is not None]
    if not sharded:
        return
    if len(sharded) != len(named):
        plain = next(name for name, r in named if r.shard is None)
        raise MergeError(f"{plain}: not a shard report (no --shard) but the others are; merge shards of one run")
    counts = {s.count for _, s in sharded}
    if len(counts) > 1:
        listing = ", ".join(f"{name} is {s}" for name, s in sharded)
        raise MergeError(f"the reports are shards of different splits ({listing})")
    count = counts.pop()
    seen: dict[int, str] = {}
    for name, s in sharded:
        if s.index in seen:
            raise MergeError(f"{name} and {seen[s.index]} are both shard {s}")
        seen[s.index] = name
    missing = [f"{i}/{count}" for i in range(1, count + 1) if i not in seen]
    if missing:
        raise MergeError(f"shard(s) {', '.join(missing)} missing: merge every shard's report (got {len(seen)})")


def merge_reports(named: Sequence[tuple[str, RunReport]]) -> RunReport:
    """Merge reports, each given with its name (its file) for error messages. Shard reports are
    ordered by shard; a test that appears in two reports is an error, as is a missing shard."""
    if not named:
        raise MergeError("no reports to merge")
    _check_shards(named)
    ordered = sorted(named, key=lambda nr: nr[1].shard.index if nr[1].shard else 0)
    owner: dict[tuple[str, str], str] = {}
    results: list[TestResult] = []
    agents: dict[str, None] = {}
    for name, report in ordered:
        counted = sum(s.total for s in report.summaries)
        if counted != len(report.results):
            raise MergeError(
                f"{name}: its summaries count {counted} result(s) but it holds {len(report.results)}; "
                "merge whole JSON reports (--reporter json=FILE)"
            )
        agents.update(dict.fromkeys(s.agent for s in report.summaries))
        for r in report.results:
            key = (r.agent, r.test_id)
            if key in owner:
                raise MergeError(f"{r.test_id} ({r.agent}) is in both {owner[key]} and {name}: not disjoint shards")
            owner[key] = name
            agents.setdefault(r.agent, None)
            results.append(r)
    tallies = {a: SummaryTally(a) for a in agents}
    for r in results:
        tallies[r.agent].add(r)
    reports = [r for _, r in ordered]
    not_run = {a: sum(s.not_run for r in reports for s in r.summaries if s.agent == a) for a in agents}
    skipped = {a: sum(s.skipped for r in reports for s in r.summaries if s.agent == a) for a in agents}
    reason = next((r.not_run_reason for r in reports if r.not_run_reason), None)
    summaries = [tallies[a].summary(not_run=not_run[a], not_run_reason=reason, skipped=skipped[a]) for a in agents]
    return RunReport(
        started_at=min(r.started_at for r in reports),
        finished_at=max(r.finished_at for r in reports),
        summaries=summaries,
        results=results,
        # every shard loads every file: the same load error is said once
        load_errors=list(dict.fromkeys(e for r in reports for e in r.load_errors)),
        hook_errors=[e for r in reports for e in r.hook_errors],
        not_run=sum(not_run.values()),
        skipped=sum(skipped.values()),
        not_run_reason=reason if sum(not_run.values()) else None,
        not_run_tests=[t for r in reports for t in r.not_run_tests],
        warnings=list(dict.fromkeys(w for r in reports for w in r.warnings)),
        merged_from=[r.eval_run_id or "" for r in reports],
        budget=merged_budget(reports),
    )


def merged_budget(reports: Sequence[RunReport]) -> BudgetSpend | None:
    """The shards' budgets as one: each shard is a run of its own, held to its own limits, so
    together they may spend the sum of them (docs/budgets.md, "Budgets and shards"). A limit counts
    only when every shard had it; the spend is the shards' together; `reached` names each shard
    the budget stopped."""
    budgets = [(r.shard, r.budget) for r in reports if r.budget is not None]
    if not budgets:
        return None

    def total(name: str) -> float | None:
        values: list[float | None] = [getattr(b, name) for _, b in budgets]
        if len(budgets) < len(reports) or any(v is None for v in values):
            return None
        return sum(v for v in values if v is not None)

    reached = "; ".join(f"shard {s}: {b.reached}" if s else str(b.reached) for s, b in budgets if b.reached)
    tokens = total("max_tokens")
    return BudgetSpend(
        max_cost_usd=total("max_cost_usd"),
        max_judge_cost_usd=total("max_judge_cost_usd"),
        max_tokens=int(tokens) if tokens is not None else None,
        cost_usd=round(sum(b.cost_usd for _, b in budgets), 8),
        judge_cost_usd=round(sum(b.judge_cost_usd for _, b in budgets), 8),
        tokens=sum(b.tokens for _, b in budgets),
        judge_cache_hits=sum(b.judge_cache_hits for _, b in budgets),
        reached=reached or None,
        shards=len(reports) if any(r.shard is not None for r in reports) else None,
    )


def dump(report: RunReport) -> str:
    """The merged report as `--reporter json` writes one."""
    return json.dumps(report.model_dump(mode="json"), ensure_ascii=False) + "\n"
