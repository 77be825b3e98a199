"""One OpenSearch index through opensearch-py, created with an explicit mapping on first use.

The client is the trace source's (`agent_health.traces.opensearch.build_client`): the same url,
basic / SigV4 auth and TLS options. Settings (`store.settings`): url, index, auth, verify_certs,
ca_certs, client_cert, client_key, ssl_assert_hostname, timeout_s, max_retries,
retry_on_timeout, page_size (documents per search page, default 5000), mget_size (ids per mget, default 10000).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from opensearchpy import helpers

from agent_health.backends.shared import check_no_inline_secrets
from agent_health.config.secrets import redact_url
from agent_health.errors import ConfigError, StoreError
from agent_health.traces.opensearch import build_client, opensearch_url

MAX_ID_BYTES = 512  # OpenSearch's limit on a document id
_HIT_FIELDS = "hits.hits._source,hits.hits.sort"


def doc_id(*parts: str) -> str:
    """A readable, reversible-enough document id for a tuple of key parts ('|' and '%' quoted so
    distinct tuples never collide); a hash when it would pass OpenSearch's 512-byte limit."""
    text = "|".join(quote(p, safe="@:/._-+=,~ ") for p in parts)
    if len(text.encode()) <= MAX_ID_BYTES:
        return text
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _unsupported(exc: Exception) -> bool:
    """True when a request failed because the service has no such API: 404, 405 or 501 (but a
    missing index), or OpenSearch's own 400 "no handler found for uri"."""
    status = getattr(exc, "status_code", None)
    text = f"{getattr(exc, 'error', '')} {getattr(exc, 'info', '')}"
    if status == 400:
        return "no handler found" in text
    return status in (404, 405, 501) and "index_not_found" not in text


class OpenSearchIndex:
    """Documents in one index. `ensure()` creates it with `mapping` once per process; a race
    with another process creating it too is harmless."""

    doc_id = staticmethod(doc_id)  # ids within this backend's limit, for those holding an index

    def __init__(
        self,
        settings: Mapping[str, Any],
        index: str,
        mapping: Mapping[str, Any],
        setting: str = "store.settings",
        *,
        client: Any = None,
    ):
        check_no_inline_secrets(settings, setting)
        if not index or index != index.lower() or any(c in index for c in ' "*\\<|,>/?'):
            raise ConfigError(f"{setting}.index: {index!r} is not a valid OpenSearch index name (lowercase, no */?,)")
        self.settings = dict(settings)
        self.index = index
        self.mapping = dict(mapping)
        self.setting = setting
        self.page_size = int(settings.get("page_size", 5000))
        self.mget_size = int(settings.get("mget_size", 10000))
        self.url = opensearch_url(settings)
        self._client = client
        self._ready = False
        self._no_refresh = False  # the service has no refresh API (serverless)
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = build_client(self.settings, self.setting)
        return self._client

    @property
    def location(self) -> str:
        return f"OpenSearch {redact_url(self.url)} index {self.index}"

    def fail(self, what: str, exc: Exception) -> StoreError:
        info = getattr(exc, "info", None)
        reason = ""
        if isinstance(info, dict):
            err = info.get("error")
            reason = str(err.get("reason", "")) if isinstance(err, dict) else str(err or "")
        detail = reason or redact_url(str(exc))[:300]
        return StoreError(f"{self.location}: {what}: {type(exc).__name__}: {detail}")

    def ensure(self) -> Any:
        """The client, after creating the index with its mapping if it does not exist yet."""
        if self._ready:
            return self.client
        with self._lock:
            if not self._ready:
                client = self.client
                try:
                    if not client.indices.exists(index=self.index):
                        client.indices.create(index=self.index, body={"mappings": self.mapping})
                except Exception as exc:
                    if "resource_already_exists_exception" not in str(exc):
                        raise self.fail("cannot create the index", exc) from exc
                self._ready = True
        return self.client

    def refresh(self) -> None:
        """Make every write so far visible to searches. A service without the refresh API (Amazon
        OpenSearch Serverless; searches there see writes within seconds) is
        not asked again; any other failure (credentials refused, no permission to refresh, the
        index gone, the node unreachable) is a StoreError: a search after it would silently miss
        what was just written."""
        if self._no_refresh:
            return
        client = self.ensure()
        try:
            client.indices.refresh(index=self.index)
        except Exception as exc:
            if _unsupported(exc):
                self._no_refresh = True
                return
            raise self.fail("cannot refresh the index (writes would stay unseen by searches)", exc) from exc

    def get(self, id: str, source: list[str] | None = None) -> dict[str, Any] | None:
        """One document's _source (realtime: sees every acknowledged write), or None."""
        try:
            doc = self.ensure().get(index=self.index, id=id, _source_includes=source, ignore=[404])
        except Exception as exc:
            raise self.fail(f"cannot read {id}", exc) from exc
        return doc.get("_source") if doc.get("found") else None

    def get_many(self, ids: list[str], source: list[str] | None = None) -> Iterator[tuple[str, dict[str, Any] | None]]:
        """(id, _source or None) for each id, in order, `mget_size` ids per mget request."""
        client = self.ensure()
        for i in range(0, len(ids), self.mget_size):
            chunk = ids[i : i + self.mget_size]
            try:
                resp = client.mget(index=self.index, body={"ids": chunk}, _source_includes=source)
            except Exception as exc:
                raise self.fail(f"cannot read {len(chunk)} documents", exc) from exc
            for doc in resp["docs"]:
                yield doc["_id"], (doc.get("_source") if doc.get("found") else None)

    def put(self, id: str, body: dict[str, Any], *, if_absent: bool = False) -> bool:
        """Index one document under `id` (replacing it). With `if_absent`, create only: False when
        it exists already (another writer won; nothing is overwritten)."""
        try:
            if if_absent:
                self.ensure().index(index=self.index, id=id, body=body, op_type="create")
            else:
                self.ensure().index(index=self.index, id=id, body=body)
        except Exception as exc:
            if if_absent and getattr(exc, "status_code", None) == 409:
                return False
            raise self.fail(f"cannot write {id}", exc) from exc
        else:
            return True

    def put_many(self, docs: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Index many documents with the bulk API (`helpers.bulk`); every failure is reported."""
        actions = ({"_index": self.index, "_id": id, "_source": body} for id, body in docs)
        try:
            ok, errors = helpers.bulk(self.ensure(), actions, chunk_size=500, raise_on_error=False, max_retries=3)
        except Exception as exc:
            raise self.fail("bulk write failed", exc) from exc
        if errors:
            first = errors[0].get("index", errors[0])
            raise StoreError(
                f"{self.location}: {len(errors)} documents not written, e.g. {first.get('_id')}: {first.get('error')}"
            )
        return int(ok)

    def delete(self, id: str) -> bool:
        try:
            resp = self.ensure().delete(index=self.index, id=id, ignore=[404])
        except Exception as exc:
            raise self.fail(f"cannot delete {id}", exc) from exc
        return bool(resp.get("result") == "deleted")

    def count(self, query: dict[str, Any]) -> int:
        """How many documents match `query` (as of the last refresh)."""
        try:
            return int(self.ensure().count(index=self.index, body={"query": query})["count"])
        except Exception as exc:
            raise self.fail("count failed", exc) from exc

    def search(
        self, query: dict[str, Any], sort: list[Any], source: list[str] | bool = True
    ) -> Iterator[dict[str, Any]]:
        """Every matching document's _source in `sort` order, paged with search_after (`sort`
        must end with a unique field so pages never skip or repeat a document)."""
        client = self.ensure()
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {"query": query, "sort": sort, "size": self.page_size, "_source": source}
            if after is not None:
                body["search_after"] = after
            try:
                # filter_path: only what is read comes back (no _index/_id/_score on every hit)
                resp = client.search(index=self.index, body=body, filter_path=_HIT_FIELDS)
            except Exception as exc:
                raise self.fail("search failed", exc) from exc
            hits = resp.get("hits", {}).get("hits", [])  # filter_path drops "hits" when none match
            for hit in hits:
                yield hit.get("_source") or {}
            if len(hits) < self.page_size:
                return
            after = hits[-1]["sort"]
