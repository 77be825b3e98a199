"""`results_frame`: stored results as a pandas DataFrame, for notebooks.

Built from result summaries (the light part of each stored result), so a frame of thousands of
results loads in about the time a rollup does. pandas is imported only when a frame is built.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from agent_health.config import Config, load_config
from agent_health.errors import UsageError
from agent_health.stores import LocalResultStore, ResultStore, ResultSummary, open_store

COLUMNS = (
    "agent",
    "agent_key",
    "agent_version",
    "suite",
    "test_id",
    "labels",
    "status",
    "passed",
    "score",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "judge_tokens",
    "cost_usd",
    "latency_ms",
    "epochs",
    "pass_at_k",
    "pass_hat_k",
    "flaky",
    "insights",
    "error",
    "content_hash",
)


def _store(source: ResultStore | Config | str | os.PathLike[str] | None) -> ResultStore:
    if isinstance(source, ResultStore):
        return source
    if isinstance(source, Config):
        return open_store(source)
    if source is None:
        return open_store(load_config())
    path = Path(source)
    if path.is_dir():
        return LocalResultStore(path)
    if path.is_file():
        return open_store(load_config(path))
    raise UsageError(f"results_frame: {path} is neither a result store folder nor a configuration file")


def _names(value: str | Iterable[str] | None) -> list[str] | None:
    return [value] if isinstance(value, str) else (list(value) if value is not None else None)


def _summaries(
    store: ResultStore, agents: list[str] | None, suites: list[str] | None, run: str | None
) -> Iterator[ResultSummary]:
    if run is not None:
        if store.get_run(run) is None:
            raise UsageError(f"results_frame: no run {run!r} in store {store.location}")
        for r in store.run_results(run):
            if (agents is None or r.agent in agents) and (suites is None or r.suite in suites):
                yield ResultSummary.of(r)
        return
    wanted: list[str | None] = list(agents) if agents is not None else [None]
    keys = [k for agent in wanted for k in store.list(agent=agent) if suites is None or k.suite in suites]
    yield from store.get_summaries(keys)


def _row(s: ResultSummary) -> dict[str, Any]:
    key, _, version = s.agent.partition("@")
    return {
        "agent": s.agent,
        "agent_key": key,
        "agent_version": version or None,
        "suite": s.suite,
        "test_id": s.test_id,
        "labels": list(s.labels),
        "status": s.status,
        "passed": s.status == "passed",
        "score": s.score,
        "input_tokens": s.usage.input_tokens,
        "output_tokens": s.usage.output_tokens,
        "total_tokens": s.usage.total_tokens,
        "judge_tokens": s.judge_usage.total_tokens,
        "cost_usd": s.cost_usd,
        "latency_ms": s.duration_ms,
        "epochs": s.epochs,
        "pass_at_k": s.pass_at_k,
        "pass_hat_k": s.pass_hat_k,
        "flaky": s.flaky,
        "insights": len(s.insights),
        "error": s.error,
        "content_hash": s.content_hash,
    }


def iter_rows(
    store_or_config: ResultStore | Config | str | os.PathLike[str] | None = None,
    *,
    agents: str | Iterable[str] | None = None,
    suites: str | Iterable[str] | None = None,
    run: str | None = None,
) -> Iterator[dict[str, Any]]:
    """The rows of `results_frame` as plain dicts (no pandas needed)."""
    store = _store(store_or_config)
    for s in _summaries(store, _names(agents), _names(suites), run):
        yield _row(s)


def results_frame(
    store_or_config: ResultStore | Config | str | os.PathLike[str] | None = None,
    *,
    agents: str | Iterable[str] | None = None,
    suites: str | Iterable[str] | None = None,
    run: str | None = None,
) -> pd.DataFrame:
    """Stored results as a DataFrame: one row per test x agent version (the latest result of each),
    or the results of one evaluation run (`run=`), with labels, status, score, tokens, cost and
    latency (see `COLUMNS`).

    `store_or_config`: a ResultStore, a Config, a store folder, a configuration file, or None for
    the project found from the current folder. `agents` / `suites` keep only those (KEY@VERSION,
    suite names)."""
    rows = list(iter_rows(store_or_config, agents=agents, suites=suites, run=run))
    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    # numbers stay numbers when a column is all missing (no scores, no costs)
    return frame.astype({"score": "float64", "cost_usd": "float64", "pass_at_k": "float64", "pass_hat_k": "float64"})
