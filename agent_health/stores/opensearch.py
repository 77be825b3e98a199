"""OpenSearch result store: one document per (agent version, suite, test), the full results and
the run history in two more indices.

The results index (`index`, default "agent-health-results") has an explicit mapping: the key
fields and the headline figures are keywords and numbers a dashboard can query, and the summary
rollups read is stored, not indexed. `<index>-full` holds each full result (stored, not indexed),
so the bulk summary read never makes the node parse trajectories. The document id is the key in
both, so a rewrite replaces the documents (idempotent: a retried step never duplicates a result);
the full result is written first, so a summary never points at a result that is not there yet.
`<index>-runs` holds typed documents: `run` (a manifest), `result` (each result a run stored,
with the time it was stored), `label` (a human label; one per result, claim, judge and labeller:
a newer one replaces it) and `calibration` (each judge calibration, kept).

Reads by key use `mget` (realtime: they see every acknowledged write); listings refresh the index
first, so a listing right after a write includes it. A summary read asking for most of a large
suite (a rollup) refreshes and reads the suite with one sorted search instead of mget.
"""

from __future__ import annotations

import builtins
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from agent_health.backends.opensearch import OpenSearchIndex, doc_id
from agent_health.model import EvalRun, TestResult
from agent_health.model.calibration import Calibration, Label
from agent_health.model.validation import describe_errors
from agent_health.stores.base import ResultKey, ResultStore, StoreError, newest_labels, skip_unreadable_run
from agent_health.stores.summary import ResultSummary

M = TypeVar("M", TestResult, EvalRun, ResultSummary)  # what _parse reads back

DEFAULT_INDEX = "agent-health-results"
_STORED = {"type": "object", "enabled": False}  # kept in _source, never indexed

RESULTS_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "key": {"type": "keyword"},
        "agent": {"type": "keyword"},
        "suite": {"type": "keyword"},
        "test_id": {"type": "keyword"},
        "status": {"type": "keyword"},
        "score": {"type": "float"},
        "labels": {"type": "keyword"},
        "cost_usd": {"type": "double"},
        "duration_ms": {"type": "double"},
        "total_tokens": {"type": "long"},
        "content_hash": {"type": "keyword"},
        "eval_run_id": {"type": "keyword"},
        "stored_at": {"type": "date", "format": "epoch_millis"},
        "summary": _STORED,
    },
}

FULL_MAPPING: dict[str, Any] = {"dynamic": False, "properties": {"key": {"type": "keyword"}, "result": _STORED}}

RUNS_MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "kind": {"type": "keyword"},
        "key": {"type": "keyword"},
        "run_id": {"type": "keyword"},
        "started_at": {"type": "double"},
        "stored_ns": {"type": "long"},
        "run": _STORED,
        "result": _STORED,
        "label": _STORED,
        "calibration": _STORED,
    },
}


SCAN_FROM = 500  # a suite read asking for this many summaries may be read by search (_worth_a_scan)


def _suite_query(agent: str, suite: str) -> dict[str, Any]:
    return {"bool": {"filter": [{"term": {"agent": agent}}, {"term": {"suite": suite}}]}}


def key_id(key: ResultKey) -> str:
    return doc_id(key.agent, key.suite, key.test_id)


class OpenSearchResultStore(ResultStore):
    """Results as documents in an OpenSearch index (see the module docstring)."""

    def __init__(self, settings: Mapping[str, Any], *, client: Any = None):
        index = str(settings.get("index", DEFAULT_INDEX))
        self.results = OpenSearchIndex(settings, index, RESULTS_MAPPING, client=client)
        self.full = OpenSearchIndex(settings, f"{index}-full", FULL_MAPPING, client=client)
        self.runs = OpenSearchIndex(settings, f"{index}-runs", RUNS_MAPPING, client=client)

    @property
    def location(self) -> str:
        return self.results.location

    def _doc(self, result: TestResult) -> tuple[str, dict[str, Any]]:
        key = ResultKey.of(result)
        summary = ResultSummary.of(result)
        return key_id(key), {
            "key": key_id(key),
            "agent": key.agent,
            "suite": key.suite,
            "test_id": key.test_id,
            "status": result.status,
            "score": result.score,
            "labels": list(result.labels),
            "cost_usd": result.cost_usd,
            "duration_ms": result.duration_ms,
            "total_tokens": result.usage.total_tokens,
            "content_hash": result.content_hash,
            "eval_run_id": result.eval_run_id,
            "stored_at": int(time.time() * 1000),
            "summary": summary.model_dump(mode="json"),
        }

    def _full_doc(self, result: TestResult) -> tuple[str, dict[str, Any]]:
        id = key_id(ResultKey.of(result))
        return id, {"key": id, "result": result.model_dump(mode="json")}

    def _run_doc(self, result: TestResult) -> tuple[str, dict[str, Any]]:
        run_id = str(result.eval_run_id)
        key = key_id(ResultKey.of(result))
        # One document per (run, key): a result stored twice in a run counts once, at its last time.
        return doc_id("result", run_id, key), {
            "kind": "result",
            "key": key,
            "run_id": run_id,
            "stored_ns": time.time_ns(),
            "result": result.model_dump(mode="json"),
        }

    # -- results ---------------------------------------------------------------------------------
    def put(self, result: TestResult) -> ResultKey:
        self.full.put(*self._full_doc(result))
        self.results.put(*self._doc(result))
        if result.eval_run_id:
            self.runs.put(*self._run_doc(result))
        return ResultKey.of(result)

    def put_many(self, results: Iterable[TestResult]) -> builtins.list[ResultKey]:
        results = list(results)
        self.full.put_many(self._full_doc(r) for r in results)
        self.results.put_many(self._doc(r) for r in results)
        self.runs.put_many(self._run_doc(r) for r in results if r.eval_run_id)
        return [ResultKey.of(r) for r in results]

    def _parse(self, what: str, doc: Mapping[str, Any] | None, field: str, model: type[M]) -> M | None:
        if doc is None or field not in doc:
            return None
        try:
            return model.model_validate(doc[field])
        except ValidationError as exc:
            raise StoreError(
                f"result store {self.location}: {what} is not a valid {model.__name__}: "
                f"{exc.errors()[0].get('msg', exc)}"
            ) from exc

    def get(self, key: ResultKey) -> TestResult | None:
        return self._parse(key_id(key), self.full.get(key_id(key)), "result", TestResult)

    def get_many(self, keys: Iterable[ResultKey]) -> Iterator[TestResult]:
        for id, doc in self.full.get_many([key_id(k) for k in keys]):
            result = self._parse(id, doc, "result", TestResult)
            if result is not None:
                yield result

    def get_summaries(self, keys: Iterable[ResultKey]) -> Iterator[ResultSummary]:
        keys = list(keys)
        wanted: dict[tuple[str, str], set[str]] = {}
        for k in keys:
            wanted.setdefault((k.agent, k.suite), set()).add(k.test_id)
        scanned = {group for group, tests in wanted.items() if self._worth_a_scan(*group, len(tests))}
        found: dict[ResultKey, ResultSummary] = {}
        for agent, suite in scanned:
            tests = wanted[(agent, suite)]
            for doc in self.results.search(_suite_query(agent, suite), [{"key": "asc"}], ["test_id", "summary"]):
                key = ResultKey(agent, suite, str(doc.get("test_id")))
                summary = self._parse(key_id(key), doc, "summary", ResultSummary) if key.test_id in tests else None
                if summary is not None:
                    found[key] = summary
        by_id = list(dict.fromkeys(k for k in keys if (k.agent, k.suite) not in scanned))
        sources = self.results.get_many([key_id(k) for k in by_id], ["summary"])
        for key, (id, source) in zip(by_id, sources, strict=True):
            summary = self._parse(id, source, "summary", ResultSummary)
            if summary is not None:
                found[key] = summary
        yield from (found[k] for k in keys if k in found)

    def _worth_a_scan(self, agent: str, suite: str, wanted: int) -> bool:
        """Whether to read a suite's summaries with one sorted search rather than mget by id: when
        most of a large suite is asked for, as a rollup does. A search reads the documents in index
        order and costs the node about half the CPU of fetching the same ids one by one (measured
        with benchmarks/rollup.py); the refresh it needs also makes it see every acknowledged write,
        as mget does."""
        if wanted < SCAN_FROM:
            return False
        self.results.refresh()
        return 2 * wanted >= self.results.count(_suite_query(agent, suite))

    def list(self, agent: str | None = None, suite: str | None = None) -> list[ResultKey]:
        self.results.refresh()
        filters = [{"term": {name: value}} for name, value in (("agent", agent), ("suite", suite)) if value is not None]
        query = {"bool": {"filter": filters}} if filters else {"match_all": {}}
        docs = self.results.search(query, sort=[{"key": "asc"}], source=["agent", "suite", "test_id"])
        return sorted(ResultKey(d["agent"], d["suite"], d["test_id"]) for d in docs)

    def delete(self, key: ResultKey) -> bool:
        deleted = self.results.delete(key_id(key))
        return self.full.delete(key_id(key)) or deleted

    # -- run history -------------------------------------------------------------------------------
    def put_run(self, run: EvalRun) -> None:
        self.runs.put(
            doc_id("run", run.id),
            {
                "kind": "run",
                "key": run.id,
                "run_id": run.id,
                "started_at": run.started_at,
                "run": run.model_dump(mode="json"),
            },
        )

    def get_run(self, run_id: str) -> EvalRun | None:
        return self._parse(f"run {run_id}", self.runs.get(doc_id("run", run_id), ["run"]), "run", EvalRun)

    def list_runs(self) -> builtins.list[EvalRun]:
        self.runs.refresh()
        docs = self.runs.search(
            {"term": {"kind": "run"}}, sort=[{"started_at": "desc"}, {"key": "desc"}], source=["run", "run_id"]
        )
        runs: builtins.list[EvalRun] = []
        for d in docs:
            try:
                runs.append(EvalRun.model_validate(d.get("run")))
            except ValidationError as exc:
                where = f"{self.runs.location} document {doc_id('run', str(d.get('run_id')))}"
                skip_unreadable_run(where, describe_errors(exc))
        return runs

    def run_results(self, run_id: str) -> Iterator[TestResult]:
        self.runs.refresh()
        query = {"bool": {"filter": [{"term": {"kind": "result"}}, {"term": {"run_id": run_id}}]}}
        for doc in self.runs.search(query, sort=[{"stored_ns": "asc"}, {"key": "asc"}], source=["result"]):
            result = self._parse(f"run {run_id}", doc, "result", TestResult)
            if result is not None:
                yield result

    # -- calibration: typed documents in the runs index (its mapping stores them, never indexes) ----
    def _typed(self, kind: str, model: type[Any]) -> builtins.list[Any]:
        self.runs.refresh()
        docs = self.runs.search({"term": {"kind": kind}}, sort=[{"stored_ns": "asc"}, {"key": "asc"}], source=[kind])
        out = [self._parse(kind, d, kind, model) for d in docs]
        return [x for x in out if x is not None]

    def put_labels(self, labels: Iterable[Label]) -> int:
        docs = []
        for label in labels:
            key = doc_id("label", json.dumps(label.key))
            docs.append(
                (
                    key,
                    {"kind": "label", "key": key, "stored_ns": time.time_ns(), "label": label.model_dump(mode="json")},
                )
            )
        return self.runs.put_many(docs) if docs else 0

    def labels(self) -> builtins.list[Label]:
        return newest_labels(self._typed("label", Label))

    def put_calibrations(self, calibrations: Iterable[Calibration]) -> None:
        docs = []
        for c in calibrations:
            key = doc_id("calibration", c.judge_key, c.criterion or "", f"{time.time_ns()}-{os.urandom(4).hex()}")
            docs.append(
                (
                    key,
                    {
                        "kind": "calibration",
                        "key": key,
                        "stored_ns": time.time_ns(),
                        "calibration": c.model_dump(mode="json"),
                    },
                )
            )
        if docs:
            self.runs.put_many(docs)

    def calibrations(self) -> builtins.list[Calibration]:
        return self._typed("calibration", Calibration)
