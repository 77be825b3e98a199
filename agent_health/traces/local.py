"""The embedded span store: OpenTelemetry spans as JSON lines under `<state>/spans/`, one file per
trace (`<trace_id>.jsonl`, logs in `<trace_id>.logs.jsonl`). No server needed."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator

from agent_health.traces import dsl
from agent_health.traces.source import Fetched, RunRef, TraceSource, best_trace_in_window
from agent_health.traces.spans import HARNESS_SERVICES, RUN_ID_ATTRIBUTES, is_harness

_SAFE = re.compile(r"^[0-9A-Za-z_-]{1,128}$")
_LOCK = threading.Lock()


class LocalSpanStore:
    """Appends spans and logs for a trace; readers see whole lines only."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def _file(self, trace_id: str, suffix: str = ".jsonl") -> Path:
        if not _SAFE.match(trace_id or ""):
            raise ValueError(f"span store: invalid trace id {trace_id!r}")
        return self.root / f"{trace_id}{suffix}"

    def _append(self, path: Path, records: Iterable[dict[str, Any]]) -> None:
        data = "".join(json.dumps(r, default=str, separators=(",", ":")) + "\n" for r in records)
        with _LOCK:  # one write per batch, so a concurrent reader never sees half a run's spans
            self.root.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                fh.write(data)

    def write_spans(self, spans: Iterable[dict[str, Any]]) -> None:
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for s in spans:
            by_trace.setdefault(s["trace_id"], []).append(s)
        for trace_id, group in by_trace.items():
            self._append(self._file(trace_id), group)

    def write_logs(self, logs: Iterable[dict[str, Any]]) -> None:
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for rec in logs:
            by_trace.setdefault(rec["trace_id"], []).append(rec)
        for trace_id, group in by_trace.items():
            self._append(self._file(trace_id, ".logs.jsonl"), group)

    def read(self, path: Path) -> list[dict[str, Any]]:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a line being written right now; the next read sees it whole
        return out

    def trace(self, trace_id: str, logs: bool = False) -> list[dict[str, Any]]:
        return self.read(self._file(trace_id, ".logs.jsonl" if logs else ".jsonl"))

    def recent(self, since_s: float, logs: bool = False) -> Iterator[list[dict[str, Any]]]:
        """Records of every trace file written since `since_s` (unix seconds)."""
        if not self.root.is_dir():
            return
        for path in self.root.iterdir():
            is_logs = path.name.endswith(".logs.jsonl")
            if path.suffix != ".jsonl" or is_logs != logs:
                continue
            try:
                if path.stat().st_mtime >= since_s:
                    yield self.read(path)
            except FileNotFoundError:
                continue


class LocalTraceSource(TraceSource):
    """Trace source over a `LocalSpanStore`."""

    name = "local"

    def __init__(self, root: str | os.PathLike[str], *, exclude_services: Iterable[str] = HARNESS_SERVICES,
                 run_id_attributes: Iterable[str] = RUN_ID_ATTRIBUTES, window_slack_s: float = 2.0):
        self.store = LocalSpanStore(root)
        self.exclude = tuple(exclude_services)
        self.run_id_attributes = tuple(run_id_attributes)
        self.slack_s = window_slack_s

    def describe(self) -> str:
        return f"local span store {self.store.root}"

    def _clean(self, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [s for s in spans if not is_harness(s, self.exclude)]

    def _by_run_id(self, records: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
        return [r for r in records if any(str((r.get("attributes") or {}).get(a)) == run_id
                                          for a in self.run_id_attributes)]

    def fetch(self, run: RunRef) -> Fetched:
        if run.trace_id and _SAFE.match(run.trace_id):
            spans = self._clean(self.store.trace(run.trace_id))
            if spans:
                return Fetched(spans, "trace_id", run.trace_id)
        since = run.started_at - 3600 if run.started_at else 0
        recent = [s for group in self.store.recent(since) for s in group]
        spans = self._clean(self._by_run_id(recent, run.run_id))
        if spans:
            return Fetched(spans, "run_id", run.run_id)
        if run.service and run.started_at:
            lo, hi = run.window_ms(self.slack_s)
            candidates = [s for s in self._clean(recent)
                          if s.get("service") == run.service and lo <= (s.get("start_ms") or 0) <= hi]
            chosen = best_trace_in_window(candidates, run)
            if chosen:
                trace_id = chosen[0].get("trace_id")
                return Fetched([s for s in self._clean(recent) if s.get("trace_id") == trace_id],
                               "time_window", trace_id)
        return Fetched()

    def logs(self, run: RunRef, found: Fetched) -> list[dict[str, Any]]:
        if found.correlation in ("trace_id", "time_window") and found.key:
            return self.store.trace(str(found.key), logs=True)
        since = run.started_at - 3600 if run.started_at else 0
        return self._by_run_id([r for g in self.store.recent(since, logs=True) for r in g], run.run_id)

    def search(self, run: RunRef, found: Fetched, body: dict[str, Any]) -> list[dict[str, Any]]:
        checked = dsl.validate(body)
        query = checked.get("query") or {"match_all": {}}
        # Only this run's (already harness-free) spans are ever searched.
        hits = [s for s in found.spans if dsl.matches(s, query)]
        return hits[checked.get("from", 0):checked.get("from", 0) + checked["size"]]
