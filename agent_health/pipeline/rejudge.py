"""Re-judging a set of pipeline partitions: the stored results of (agent version, test) pairs of one
suite, re-judged with the suite's current test bodies against their stored agent runs (the agent
is never called), stored as the latest results. What a transport's rejudge job calls."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agent_health.errors import UsageError
from agent_health.model import RunSettings, TestResult
from agent_health.pipeline.project import Project
from agent_health.reporters.base import CallbackReporter
from agent_health.session.rejudge import rejudge
from agent_health.stores import ResultKey


@dataclass
class RejudgedPartitions:
    """What re-judging a set of partitions did."""

    results: list[TestResult] = field(default_factory=list)  # the new results, as stored
    skipped: tuple[str, ...] = ()  # stored results left as they were, each with why
    missing: int = 0  # selected partitions without a stored result
    run_id: str | None = None  # the re-judging run's id, when one ran
    store: str | None = None  # where the new results were stored
    not_run: int = 0  # selected results left as they were because the run stopped early
    not_run_reason: str | None = None  # why it stopped ('budget reached', 'interrupted', ...)


def rejudge_partitions(
    project: Project,
    suite: str,
    tests_by_agent: Mapping[str, Sequence[str]],
    settings: RunSettings,
    *,
    source: str,
    transport: Literal["cli", "dagster", "api"] = "api",
    on_error: Callable[[str], None] | None = None,
    first: str = "evaluate them first",
) -> RejudgedPartitions:
    """Re-judge the stored results of `suite` for `tests_by_agent` (agent version -> test ids).
    Raises UsageError when none of them has a stored result (its message ends with `first`: what to
    do about it) or the new results could not be stored (nothing changed then), and
    AgentHealthError for a bad eval file or configuration. Messages leave the suite to the caller."""
    keys = [ResultKey(agent, suite, t) for agent, tests in tests_by_agent.items() for t in tests]
    stored = list(project.store.get_many(keys))
    if not stored:
        raise UsageError(f"no stored result for any of the {len(keys)} selected partition(s); {first}")
    out: list[TestResult] = []
    outcome = rejudge(
        stored,
        project.config,
        settings,
        source=source,
        tests=project.load_suite(suite).tests,
        store=project.store,
        reporters=[CallbackReporter(out.append)],
        transport=transport,
        on_error=on_error,
    )
    run = outcome.run
    if run is not None and run.output_errors:  # the store said no: these partitions did not change
        raise UsageError("the re-judged results could not be stored: " + "; ".join(run.output_errors))
    manifest = run.run if run is not None else None
    return RejudgedPartitions(
        not_run=sum(manifest.not_run.values()) if manifest is not None else 0,
        not_run_reason=manifest.not_run_reason if manifest is not None else None,
        results=out,
        skipped=outcome.skipped,
        missing=len(keys) - len(stored),
        run_id=run.run.id if run else None,
        store=run.store if run and run.store else None,
    )
