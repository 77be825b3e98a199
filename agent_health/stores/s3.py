"""S3 result store: one object per result, the run history beside them, summaries cached.

Layout under `s3://<bucket>/<prefix>/`:

    results/<agent>/<suite>/<test>.json        the latest result per key (one PutObject each)
    _runs/<run id>/run.json                     a run's manifest
    _runs/<run id>/results/<ns>-<key hash>.json each result the run stored, in the order it stored them
    _summaries/<agent>/<suite>.json             a cache of summaries, each with its result's ETag

Key parts are percent-quoted as in the local store. The summary cache is only ever trusted
where its ETag matches the listing of the result objects, so a stale or lost cache costs a few
reads, never a wrong figure; concurrent writers never touch it (readers rewrite it).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from pydantic import ValidationError

from agent_health.backends.s3 import S3Bucket
from agent_health.model import EvalRun, TestResult
from agent_health.stores.base import ResultKey, ResultStore, StoreError
from agent_health.stores.local import encode_part
from agent_health.stores.summary import ResultSummary

RESULTS = "results"
RUNS = "_runs"
SUMMARIES = "_summaries"
SUMMARY_CACHE_FORMAT = 1
# Below this many keys of one (agent, suite), reading them one by one beats listing the folder.
LIST_THRESHOLD = 64
_CHUNK = 256  # objects in flight per bulk read: memory stays flat in the number of results


def key_hash(key: ResultKey) -> str:
    return hashlib.sha1(json.dumps([key.agent, key.suite, key.test_id]).encode()).hexdigest()[:20]


class S3ResultStore(ResultStore):
    """Results as objects in one bucket under one prefix (see the module docstring)."""

    def __init__(self, settings: Mapping[str, Any], *, client: Any = None):
        self.bucket = S3Bucket(settings, "store.settings", client=client)

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
        key = ResultKey.of(result)
        data = result.model_dump_json().encode()
        self.bucket.put(self.object_key(key), data)
        if result.eval_run_id:
            self.bucket.put(self._run_result_key(result.eval_run_id, key), data)
        return key

    def put_many(self, results: Iterable[TestResult]) -> builtins.list[ResultKey]:
        items: builtins.list[tuple[str, bytes]] = []
        keys: builtins.list[ResultKey] = []
        for result in results:
            key = ResultKey.of(result)
            data = result.model_dump_json().encode()
            items.append((self.object_key(key), data))
            if result.eval_run_id:
                items.append((self._run_result_key(result.eval_run_id, key), data))
            keys.append(key)
        self.bucket.put_many(items)
        return keys

    def _run_result_key(self, run_id: str, key: ResultKey) -> str:
        # Zero-padded nanoseconds sort in storing order; the key hash lets a reader keep only
        # the last copy of a result stored twice without reading either.
        return f"{self._run_prefix(run_id)}results/{time.time_ns():020d}-{key_hash(key)}.json"

    def get(self, key: ResultKey) -> TestResult | None:
        return self._parse(self.object_key(key), self.bucket.get(self.object_key(key)), TestResult)

    def _parse(self, name: str, data: bytes | None, model: type[Any]) -> Any:
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
        if agent is not None:
            prefix = self._folder(agent, suite)
        else:
            prefix = self.bucket.key(RESULTS) + "/"
        keys = [k for name, _ in self.bucket.list(prefix) if (k := self._parse_key(name)) is not None]
        if suite is not None:
            keys = [k for k in keys if k.suite == suite]
        return sorted(keys)

    def delete(self, key: ResultKey) -> bool:
        return self.bucket.delete(self.object_key(key))

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
                found.update(self._group_summaries(agent, suite, members))
        for k in keys:
            if k in found:
                yield found[k]

    def _cache_key(self, agent: str, suite: str) -> str:
        return self.bucket.key(SUMMARIES, encode_part(agent), encode_part(suite) + ".json")

    def _group_summaries(
        self, agent: str, suite: str, members: builtins.list[ResultKey]
    ) -> dict[ResultKey, ResultSummary]:
        """One listing (ETags), one cache object, and reads of only what the cache lacks."""
        etags: dict[str, str] = {}
        folder = self._folder(agent, suite)
        for name, tag in self.bucket.list(folder):
            etags[name[len(folder) :]] = tag
        cached = self._load_cache(agent, suite)
        out: dict[ResultKey, ResultSummary] = {}
        stale: builtins.list[ResultKey] = []
        for k in members:
            leaf = encode_part(k.test_id) + ".json"
            etag = etags.get(leaf)
            if etag is None:
                continue  # not stored
            entry = cached.get(leaf)
            if entry is not None and entry[0] == etag:
                out[k] = ResultSummary.model_validate(entry[1])
            else:
                stale.append(k)
        if not stale:
            return out
        names = [self.object_key(k) for k in stale]
        for i in range(0, len(names), _CHUNK):
            for k, (name, found) in zip(stale[i : i + _CHUNK], self.bucket.fetch_many(names[i : i + _CHUNK])):
                if found is None:
                    continue  # deleted since the listing
                summary = self._parse(name, found[0], ResultSummary)
                out[k] = summary
                # The listing's ETag may be older than the object just read (a writer in
                # between): cache the summary under the ETag of what was read.
                cached[encode_part(k.test_id) + ".json"] = (found[1], summary.model_dump(mode="json"))
        live = {leaf: entry for leaf, entry in cached.items() if leaf in etags}
        self._save_cache(agent, suite, live)
        return out

    def _load_cache(self, agent: str, suite: str) -> dict[str, tuple[str, dict[str, Any]]]:
        try:
            data = self.bucket.get(self._cache_key(agent, suite))
            doc = json.loads(data) if data else {}
        except (StoreError, ValueError):
            return {}  # a cache is never worth failing a read for
        if not isinstance(doc, dict) or doc.get("format") != SUMMARY_CACHE_FORMAT:
            return {}
        return {leaf: (str(e[0]), e[1]) for leaf, e in doc.get("entries", {}).items()}

    def _save_cache(self, agent: str, suite: str, entries: dict[str, tuple[str, dict[str, Any]]]) -> None:
        doc = {"format": SUMMARY_CACHE_FORMAT, "entries": {leaf: list(e) for leaf, e in entries.items()}}
        try:
            self.bucket.put(self._cache_key(agent, suite), json.dumps(doc, separators=(",", ":")).encode())
        except StoreError:
            pass  # read-only credentials still read; the next reader rebuilds what it needs

    # -- run history -------------------------------------------------------------------------------
    def put_run(self, run: EvalRun) -> None:
        self.bucket.put(self._run_prefix(run.id) + "run.json", run.model_dump_json(indent=1).encode())

    def get_run(self, run_id: str) -> EvalRun | None:
        name = self._run_prefix(run_id) + "run.json"
        return self._parse(name, self.bucket.get(name), EvalRun)

    def list_runs(self) -> builtins.list[EvalRun]:
        prefix = self.bucket.key(RUNS) + "/"
        names = [n for n, _ in self.bucket.list(prefix) if n.endswith("/run.json") and n.count("/", len(prefix)) == 1]
        runs = [self._parse(n, data, EvalRun) for n, data in self.bucket.get_many(names)]
        return sorted((r for r in runs if r is not None), key=lambda r: (r.started_at, r.id), reverse=True)

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
