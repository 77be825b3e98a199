"""S3 result store: one object per result, the run history beside them, and a summary log per
suite that rollups read instead of every result.

Layout under `s3://<bucket>/<prefix>/`:

    results/<agent>/<suite>/<test>.json        the latest result per key (one PutObject each)
    _runs/<run id>/run.json                     a run's manifest
    _runs/<run id>/results/<ns>-<key hash>.json each result the run stored, in the order it stored them
    _summary_log/<agent>/<suite>/               the suite's summary log (see stores/s3_log.py)
    _calibration/{labels,calibrations}/<ns>-<random>.jsonl
                                                human labels and judge calibrations, one object
                                                per batch (never rewritten, read in storing order)

Key parts are percent-quoted as in the local store. Every write of results goes through the
summary log (a pending chunk, the objects, the chunk committed), so a rollup over 10,000 results
reads a few log objects, not 10,000; the log is only trusted where it can vouch for a result, and
the result objects stay the truth `get` reads.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar, overload
from urllib.parse import unquote

from pydantic import BaseModel, ValidationError

from agent_health.backends.s3 import S3Bucket
from agent_health.model import EvalRun, TestResult
from agent_health.model.calibration import Calibration, Label
from agent_health.model.validation import describe_errors
from agent_health.stores.base import ResultKey, ResultStore, StoreError, newest_labels, skip_unreadable_run
from agent_health.stores.local import encode_part
from agent_health.stores.s3_log import LOG, LogSettings, SummaryLog, Write
from agent_health.stores.summary import ResultSummary

M = TypeVar("M", TestResult, EvalRun, ResultSummary)  # what _parse reads back
B = TypeVar("B", bound=BaseModel)  # what a calibration batch holds (labels, calibrations)

RESULTS = "results"
RUNS = "_runs"
CALIBRATION = "_calibration"
# Below this many keys of one (agent, suite), reading them one by one beats reading the log.
LIST_THRESHOLD = 64
_CHUNK = 256  # objects in flight per bulk read: memory stays flat in the number of results


def key_hash(key: ResultKey) -> str:
    return hashlib.sha1(json.dumps([key.agent, key.suite, key.test_id]).encode()).hexdigest()[:20]


class S3ResultStore(ResultStore):
    """Results as objects in one bucket under one prefix (see the module docstring)."""

    def __init__(self, settings: Mapping[str, Any], *, client: Any = None):
        self.bucket = S3Bucket(settings, "store.settings", client=client)
        self.log = SummaryLog(
            self.bucket,
            object_key=lambda agent, suite, test_id: self.object_key(ResultKey(agent, suite, test_id)),
            results_folder=self._folder,
            folder=lambda agent, suite: self.bucket.key(LOG, encode_part(agent), encode_part(suite)) + "/",
            parse_summary=lambda name, data: self._parse(name, data, ResultSummary),
            settings=LogSettings.of(settings, "store.settings"),
        )

    @property
    def location(self) -> str:
        return self.bucket.location

    # -- keys ------------------------------------------------------------------------------------
    def _folder(self, agent: str, suite: str | None = None) -> str:
        parts = [RESULTS, encode_part(agent)] + ([encode_part(suite)] if suite is not None else [])
        return self.bucket.key(*parts) + "/"

    def object_key(self, key: ResultKey) -> str:
        return self._folder(key.agent, key.suite) + encode_part(key.test_id) + ".json"

    def _parse_key(self, name: str) -> ResultKey | None:
        rel = name[len(self.bucket.key(RESULTS)) + 1 :]
        parts = rel.split("/")
        if len(parts) != 3 or not parts[2].endswith(".json"):
            return None
        return ResultKey(unquote(parts[0]), unquote(parts[1]), unquote(parts[2][: -len(".json")]))

    def _run_prefix(self, run_id: str) -> str:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise StoreError(f"result store {self.location}: invalid run id {run_id!r}")
        return self.bucket.key(RUNS, run_id) + "/"

    # -- results ---------------------------------------------------------------------------------
    def put(self, result: TestResult) -> ResultKey:
        return self.put_many([result])[0]

    def put_many(self, results: Iterable[TestResult]) -> builtins.list[ResultKey]:
        keys: builtins.list[ResultKey] = []
        groups: dict[tuple[str, str], builtins.list[Write]] = defaultdict(list)
        for result in results:
            key = ResultKey.of(result)
            data = result.json_text().encode()
            objects = [(self.object_key(key), data)]
            if result.eval_run_id:
                objects.append((self._run_result_key(result.eval_run_id, key), data))
            groups[(key.agent, key.suite)].append(Write(key.test_id, tuple(objects), ResultSummary.of(result)))
            keys.append(key)
        self._write(groups)
        return keys

    def _write(self, groups: Mapping[tuple[str, str], builtins.list[Write]]) -> None:
        """Each suite's writes through its summary log; the first failure raises once all ran."""
        failures = [e for (agent, suite), writes in groups.items() for e in self.log.write(agent, suite, writes) if e]
        if failures:
            raise failures[0]

    def _run_result_key(self, run_id: str, key: ResultKey) -> str:
        # Zero-padded nanoseconds sort in storing order; the key hash lets a reader keep only
        # the last copy of a result stored twice without reading either.
        return f"{self._run_prefix(run_id)}results/{time.time_ns():020d}-{key_hash(key)}.json"

    def get(self, key: ResultKey) -> TestResult | None:
        return self._parse(self.object_key(key), self.bucket.get(self.object_key(key)), TestResult)

    @overload
    def _parse(self, name: str, data: bytes, model: type[M]) -> M: ...
    @overload
    def _parse(self, name: str, data: bytes | None, model: type[M]) -> M | None: ...
    def _parse(self, name: str, data: bytes | None, model: type[M]) -> M | None:
        if data is None:
            return None
        try:
            return model.model_validate_json(data)
        except ValidationError as exc:
            raise StoreError(
                f"result store {self.location}: {name} is not a valid {model.__name__}: "
                f"{exc.errors()[0].get('msg', exc)}"
            ) from exc

    def get_many(self, keys: Iterable[ResultKey]) -> Iterator[TestResult]:
        names = [self.object_key(k) for k in keys]
        for i in range(0, len(names), _CHUNK):
            for name, data in self.bucket.get_many(names[i : i + _CHUNK]):
                result = self._parse(name, data, TestResult)
                if result is not None:
                    yield result

    def list(self, agent: str | None = None, suite: str | None = None) -> list[ResultKey]:
        if agent is not None and suite is not None:  # one suite: its summary log knows its keys
            return sorted(ResultKey(agent, suite, t) for t in self.log.read(agent, suite))
        prefix = self._folder(agent) if agent is not None else self.bucket.key(RESULTS) + "/"
        keys = [k for name, _ in self.bucket.list(prefix) if (k := self._parse_key(name)) is not None]
        if suite is not None:
            keys = [k for k in keys if k.suite == suite]
        return sorted(keys)

    def delete(self, key: ResultKey) -> bool:
        if not self.bucket.exists(self.object_key(key)):
            return False
        self._write({(key.agent, key.suite): [Write(key.test_id, (), None)]})
        return True

    # -- summaries: the bulk read path rollups use -------------------------------------------------
    def get_summaries(self, keys: Iterable[ResultKey]) -> Iterator[ResultSummary]:
        keys = list(keys)
        groups: dict[tuple[str, str], builtins.list[ResultKey]] = defaultdict(list)
        for k in keys:
            groups[(k.agent, k.suite)].append(k)
        found: dict[ResultKey, ResultSummary] = {}
        for (agent, suite), members in groups.items():
            if len(members) < LIST_THRESHOLD:
                names = [self.object_key(k) for k in members]
                for k, (name, data) in zip(members, self.bucket.get_many(names)):
                    summary = self._parse(name, data, ResultSummary)
                    if summary is not None:
                        found[k] = summary
            else:
                summaries = self.log.read(agent, suite, {k.test_id for k in members})
                found.update((k, summaries[k.test_id]) for k in members if k.test_id in summaries)
        for k in keys:
            if k in found:
                yield found[k]

    # -- run history -------------------------------------------------------------------------------
    def put_run(self, run: EvalRun) -> None:
        self.bucket.put(self._run_prefix(run.id) + "run.json", run.model_dump_json(indent=1).encode())

    def get_run(self, run_id: str) -> EvalRun | None:
        name = self._run_prefix(run_id) + "run.json"
        return self._parse(name, self.bucket.get(name), EvalRun)

    def list_runs(self) -> builtins.list[EvalRun]:
        prefix = self.bucket.key(RUNS) + "/"
        names = [n for n, _ in self.bucket.list(prefix) if n.endswith("/run.json") and n.count("/", len(prefix)) == 1]
        runs: builtins.list[EvalRun] = []
        for name, data in self.bucket.get_many(names):
            if data is None:  # removed since it was listed
                continue
            try:
                runs.append(EvalRun.model_validate_json(data))
            except ValidationError as exc:
                skip_unreadable_run(f"s3://{self.bucket.bucket}/{name}", describe_errors(exc))
        return sorted(runs, key=lambda r: (r.started_at, r.id), reverse=True)

    def run_results(self, run_id: str) -> Iterator[TestResult]:
        names = [n for n, _ in self.bucket.list(self._run_prefix(run_id) + "results/")]
        last: dict[str, int] = {}
        for i, name in enumerate(names):
            last[name.rsplit("-", 1)[-1]] = i  # "<ns>-<key hash>.json": the key hash
        keep = [names[i] for i in sorted(last.values())]
        for i in range(0, len(keep), _CHUNK):
            for name, data in self.bucket.get_many(keep[i : i + _CHUNK]):
                result = self._parse(name, data, TestResult)
                if result is not None:
                    yield result

    # -- calibration: one object per batch, so writers never race and nothing is rewritten ----------
    def _put_batch(self, kind: str, lines: builtins.list[bytes]) -> None:
        if lines:
            name = self.bucket.key(CALIBRATION, kind, f"{time.time_ns():020d}-{os.urandom(4).hex()}.jsonl")
            self.bucket.put(name, b"\n".join(lines) + b"\n", content_type="application/x-ndjson")

    def _read_batches(self, kind: str, model: type[B]) -> builtins.list[B]:
        names = sorted(n for n, _ in self.bucket.list(self.bucket.key(CALIBRATION, kind) + "/"))
        out: builtins.list[B] = []
        for name, data in self.bucket.get_many(names):
            for n, line in enumerate((data or b"").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    out.append(model.model_validate_json(line))
                except ValidationError as exc:
                    raise StoreError(
                        f"result store {self.location}: {name}, line {n}: {exc.errors()[0].get('msg', exc)}"
                    ) from exc
        return out

    def put_labels(self, labels: Iterable[Label]) -> int:
        lines = [label.model_dump_json().encode() for label in labels]
        self._put_batch("labels", lines)
        return len(lines)

    def labels(self) -> builtins.list[Label]:
        return newest_labels(self._read_batches("labels", Label))

    def put_calibrations(self, calibrations: Iterable[Calibration]) -> None:
        self._put_batch("calibrations", [c.model_dump_json().encode() for c in calibrations])

    def calibrations(self) -> builtins.list[Calibration]:
        return self._read_batches("calibrations", Calibration)
