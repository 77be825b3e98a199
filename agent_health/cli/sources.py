"""What `report` and `compare` read: a JSON report file, a run id in the store, a store folder, or
an agent version's latest stored results, named on the command line the same way for both.

`SPEC#KEY@VERSION` picks one agent version out of a report, run or store that holds several.
Anything that names nothing gives one UsageError (exit 2) saying what was tried and what exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from agent_health.config import Config
from agent_health.errors import UsageError
from agent_health.model import EvalRun, RunReport, RunSummary, TestResult
from agent_health.session.settings import stored_in
from agent_health.stores import LocalResultStore, ResultStore, StoreError, open_store

SourceKind = Literal["report", "run", "store", "agent"]


@dataclass
class Source:
    """Results from one place. `results()` streams them (call it again to read them again)."""

    kind: SourceKind
    label: str  # how messages and pages name it
    agents: list[str]
    results: Callable[[], Iterator[TestResult]]
    run: EvalRun | None = None
    report: RunReport | None = None
    store: ResultStore | None = None  # the store the results live in (None for a JSON report)

    @property
    def summaries(self) -> list[RunSummary]:
        """Per-agent summaries the source recorded itself (a report's or a finished run's)."""
        if self.report is not None:
            return list(self.report.summaries)
        if self.run is not None:
            return list(self.run.summaries)
        return []

    def only(self, agent: str) -> Source:
        """The same source narrowed to one agent version."""
        if agent not in self.agents:
            known = ", ".join(self.agents) or "none"
            raise UsageError(f"{self.label} has no results of {agent}; it holds: {known}")
        inner = self.results
        return Source(
            kind=self.kind,
            label=self.label,
            agents=[agent],
            results=lambda: (r for r in inner() if r.agent == agent),
            run=self.run,
            report=self.report,
            store=self.store,
        )

    def single_agent(self, role: str) -> Source:
        """This source when it holds one agent version; otherwise an error saying how to pick one."""
        if len(self.agents) == 1:
            return self
        if not self.agents:
            raise UsageError(f"{role} {self.label} holds no results")
        raise UsageError(
            f"{role} {self.label} holds results of several agent versions ({', '.join(self.agents)}); "
            f"pick one with {self.label}#{self.agents[0]}"
        )


def _agents_of(results: list[TestResult]) -> list[str]:
    return list(dict.fromkeys(r.agent for r in results))


def read_report_file(path: Path) -> RunReport:
    """A `--reporter json` file, or one clear error naming the file."""
    try:
        return RunReport.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "top level"
        raise UsageError(f"{path} is not an agent-health JSON report ({where}: {first.get('msg')})") from exc


def runs_store(config: Config) -> ResultStore:
    """The store `agent-health run` writes to under this environment and configuration (with no
    `--store` flag): `$AGENT_HEALTH_STORE`, else the configuration's. An error when that turns
    storing off, since there is then nothing stored to read."""
    settings, origin = stored_in(config)
    if settings is None:
        raise UsageError(
            f"{origin} turns storing off, so no run is stored to read: name a JSON report or a store folder, "
            "or unset it"
        )
    return open_store(config, settings)


def _from_report(path: Path) -> Source:
    report = read_report_file(path)
    results = list(report.results)
    return Source("report", str(path), _agents_of(results), lambda: iter(results), report=report)


def _from_store(store: ResultStore, label: str, agent: str | None = None) -> Source:
    keys = store.list(agent=agent)
    agents = list(dict.fromkeys(k.agent for k in keys))
    return Source("agent" if agent else "store", label, agents, lambda: store.get_many(keys), store=store)


def store_source(store: ResultStore) -> Source:
    """Every latest result in `store` (all agent versions)."""
    return _from_store(store, f"store {store.location}")


def _from_run(store: ResultStore, run: EvalRun) -> Source:
    run = run.as_seen()  # a run killed without writing its end shows as abandoned
    agents = list(run.agents)
    if not agents:  # a manifest written before its agents were known: read them off the results
        agents = list(dict.fromkeys(r.agent for r in store.run_results(run.id)))
    return Source("run", f"run {run.id}", agents, lambda: store.run_results(run.id), run=run, store=store)


def open_source(spec: str, config: Config, store: ResultStore | None = None, role: str = "source") -> Source:
    """Resolve `spec` in order: a JSON report file, a store folder, a run id in the store, an
    agent version with results in the store. A trailing `#KEY@VERSION` picks one agent version."""
    base, _, agent = spec.partition("#")
    source = _resolve(base, config, store, role)
    return source.only(agent) if agent else source


def _resolve(spec: str, config: Config, store: ResultStore | None, role: str) -> Source:
    path = Path(spec)
    if path.is_file():
        return _from_report(path)
    if path.is_dir():
        return _from_store(LocalResultStore(path), f"store {path}")
    store = store or runs_store(config)
    try:
        run = store.get_run(spec)
    except StoreError:
        run = None  # not a valid run id (it has a '/'): try the other readings
    if run is not None:
        return _from_run(store, run)
    if "@" in spec and store.list(agent=spec):
        return _from_store(store, f"{spec} (latest results in {store.location})", agent=spec)
    raise UsageError(_not_found(spec, store, role))


def listed(run: EvalRun) -> str:
    """A run in a list of runs: its id, and its status unless it finished."""
    status = run.as_seen().status
    return run.id if status == "finished" else f"{run.id} ({status})"


def _not_found(spec: str, store: ResultStore, role: str) -> str:
    if spec.endswith(".json") or "/" in spec:
        return f"{role} {spec!r}: no such file"
    runs = [listed(r) for r in store.list_runs()[:5]]
    agents = sorted({k.agent for k in store.list()})
    return (
        f"{role} {spec!r} is not a JSON report file, a store folder, a run id or an agent version with results "
        f"in store {store.location} (newest runs: {', '.join(runs) or 'none'}; agent versions with results: "
        f"{', '.join(agents) or 'none'})"
    )


def newest_run(config: Config, store: ResultStore | None = None) -> Source:
    """The newest run in the store runs write to (`runs_store`), or an error saying there is none."""
    store = store or runs_store(config)
    runs = store.list_runs()
    if not runs:
        raise UsageError(
            f"no runs in store {store.location}: run `agent-health run` first, or name a JSON report or run id"
        )
    return _from_run(store, runs[0])
