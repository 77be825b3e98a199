"""Spans and logs from OpenSearch in the Data Prepper layout (flat `@` or nested attributes).

opensearch-py (and boto3, for SigV4) are imported only when this source is used. Settings (the
`traces.settings` of the configuration; see docs/traces.md):

    url              http(s)://host:port; default $AGENT_HEALTH_OPENSEARCH_URL, else http://localhost:9200
                     (agent_health.config.deployment.OpenSearchDefaults, with the basic-auth defaults)
    index            span index pattern, default "otel-v1-apm-span-*"
    logs_index       log index pattern, default "logs-otel-v1-*"
    auth             {"type": "basic", "username": ..., "password_env": "VAR"} or
                     {"type": "sigv4", "region": ..., "service": "es" | "aoss", "profile": ...}
    verify_certs, ca_certs, client_cert, client_key, ssl_assert_hostname: TLS options
    exclude_services harness service names (default ["agent-health"])
    run_id_attributes default ["agent_health.run.id", "gen_ai.conversation.id"]
    window_slack_s   slack around a run's time window (default 2)
    batch_size       runs per query in fetch_many (default 1000); timeout_s (default 10)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from opensearchpy import OpenSearch, Urllib3AWSV4SignerAuth

from agent_health.config.deployment import OpenSearchDefaults, opensearch_defaults
from agent_health.config.secrets import redact_url, register_secret
from agent_health.errors import ConfigError, InfrastructureError
from agent_health.lazy import deferred
from agent_health.traces import dsl
from agent_health.traces.dataprepper import from_log_document, from_span_document, iso
from agent_health.traces.source import Fetched, RunRef, TraceSource, best_trace_in_window
from agent_health.traces.spans import HARNESS_ATTRIBUTE, HARNESS_SERVICES, RUN_ID_ATTRIBUTES, is_harness

if TYPE_CHECKING:
    import boto3.session as aws_session
else:
    aws_session = deferred("boto3.session")  # only for Amazon OpenSearch Service


SERVICE_FIELDS = ("serviceName", "resource.attributes.service@name", "resource.attributes.service.name")


class TraceSourceError(InfrastructureError):
    """The trace store could not be read; the message names the endpoint and index."""


def _secret(auth: Mapping[str, Any], key: str, default: str | None) -> str | None:
    if auth.get(f"{key}_env"):
        return os.environ.get(str(auth[f"{key}_env"]))
    return auth.get(key) or default


def opensearch_url(settings: Mapping[str, Any], defaults: OpenSearchDefaults | None = None) -> str:
    """The cluster of a trace source's or store's settings: `url`, else the declared default."""
    return str(settings.get("url") or (defaults or opensearch_defaults()).url)


def _register_url_password(url: str) -> None:
    password = urlsplit(url).password
    if password:
        register_secret(password, unquote(password), setting="the OpenSearch URL's password")


def build_client(settings: Mapping[str, Any], setting: str = "traces.settings") -> Any:
    """An opensearch-py client from the settings (basic auth, SigV4, TLS); errors name `setting`
    (the trace source's, or the result store's `store.settings`)."""
    defaults = opensearch_defaults()
    url = opensearch_url(settings, defaults)
    _register_url_password(url)
    kw: dict[str, Any] = {
        "hosts": [url],
        "timeout": float(settings.get("timeout_s", 10)),
        "http_compress": bool(settings.get("http_compress", False)),
    }
    for key in (
        "verify_certs",
        "ca_certs",
        "client_cert",
        "client_key",
        "ssl_assert_hostname",
        "ssl_show_warn",
        "max_retries",
        "retry_on_timeout",
        "retry_on_status",
    ):
        if key in settings:
            kw[key] = settings[key]
    auth = dict(settings.get("auth") or {})
    kind = auth.get("type") or ("basic" if (auth.get("username") or defaults.username) else None)
    if kind == "basic":
        user = _secret(auth, "username", defaults.username)
        password = _secret(auth, "password", defaults.password.get_secret_value() if defaults.password else None)
        if not user or password is None:
            raise ConfigError(
                f"{setting}.auth: basic auth needs a username and a password "
                "(password_env names the environment variable that holds it)"
            )
        # scrubbed from results, reports and logs like every credential
        register_secret(password, setting=f"{setting}.auth password")
        kw["http_auth"] = (user, password)
    elif kind == "sigv4":
        region = auth.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region:
            raise ConfigError(f"{setting}.auth: sigv4 needs a region (or AWS_REGION)")
        credentials = aws_session.Session(profile_name=auth.get("profile")).get_credentials()
        if credentials is None:
            raise ConfigError(f"{setting}.auth: sigv4 found no AWS credentials (environment, profile or role)")
        kw["http_auth"] = Urllib3AWSV4SignerAuth(credentials, region, auth.get("service", "es"))
    elif kind is not None:
        raise ConfigError(f"{setting}.auth.type: unknown {kind!r}; use basic or sigv4")
    return OpenSearch(**kw)


def _key(attribute: str, scope: str) -> list[str]:
    """Field paths of one attribute in the flat and nested forms."""
    return [f"{scope}.attributes.{attribute.replace('.', '@')}", f"attributes.{attribute}"]


def _term(field: str, value: Any) -> list[dict[str, Any]]:
    # Exact on keyword fields; `.keyword` covers indices whose strings were dynamically mapped as text.
    return [{"term": {field: value}}, {"term": {f"{field}.keyword": value}}]


def _terms(field: str, values: list[Any]) -> list[dict[str, Any]]:
    return [{"terms": {field: values}}, {"terms": {f"{field}.keyword": values}}]


def _any(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


class OpenSearchTraceSource(TraceSource):
    """Trace source over OpenSearch indices in the Data Prepper layout."""

    name = "opensearch"

    def __init__(self, settings: Mapping[str, Any] | None = None, *, client: Any = None):
        settings = dict(settings or {})
        self.settings = settings
        self.url = opensearch_url(settings)
        self.index = str(settings.get("index", "otel-v1-apm-span-*"))
        self.logs_index = str(settings.get("logs_index", "logs-otel-v1-*"))
        self.exclude = tuple(settings.get("exclude_services", HARNESS_SERVICES))
        self.run_id_attributes = tuple(settings.get("run_id_attributes", RUN_ID_ATTRIBUTES))
        self.slack_s = float(settings.get("window_slack_s", 2.0))
        self.batch_size = int(settings.get("batch_size", 1000))
        self.page_size = int(settings.get("page_size", 5000))
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = build_client(self.settings)
        return self._client

    def describe(self) -> str:
        return f"OpenSearch {redact_url(self.url)} index {self.index}"

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # -- query building ---------------------------------------------------------------------------

    def _harness(self, scope: str = "span") -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for f in SERVICE_FIELDS:
            out += _terms(f, list(self.exclude))
        for f in _key(HARNESS_ATTRIBUTE, scope):
            out.append({"term": {f: True}})
        return out

    def _run_id_clause(self, run_ids: list[str], scope: str = "span") -> dict[str, Any]:
        return _any([c for a in self.run_id_attributes for f in _key(a, scope) for c in _terms(f, run_ids)])

    def _run_filter(self, run: RunRef, found: Fetched, scope: str = "span") -> dict[str, Any]:
        """The filter that selects exactly the documents `found` came from."""
        if found.correlation == "run_id":
            return self._run_id_clause([run.run_id], scope)
        if found.key:
            return _any(_term("traceId", found.key))
        return {"bool": {"must_not": [{"match_all": {}}]}}  # nothing found: the query sees nothing

    def _search_all(self, index: str, query: dict[str, Any]) -> list[dict[str, Any]]:
        """Every matching document's _source, paged with a scroll (no per-run round trips)."""
        try:
            resp = self.client.search(
                index=index,
                body={"query": query, "size": self.page_size},
                scroll="30s",
                ignore_unavailable=True,
                allow_no_indices=True,
            )
            docs: list[dict[str, Any]] = []
            scroll_id = resp.get("_scroll_id")
            try:
                while True:
                    hits = resp["hits"]["hits"]
                    docs.extend(h["_source"] for h in hits)
                    if len(hits) < self.page_size or not scroll_id:
                        break
                    resp = self.client.scroll(scroll_id=scroll_id, scroll="30s")
                    scroll_id = resp.get("_scroll_id", scroll_id)
            finally:
                if scroll_id:
                    try:
                        self.client.clear_scroll(scroll_id=scroll_id)
                    except Exception:  # an expired scroll is already gone  # noqa: BLE001
                        pass
        except (ConfigError, TraceSourceError):
            raise
        except Exception as exc:
            raise TraceSourceError(f"{self.describe()}: {type(exc).__name__}: {redact_url(str(exc))[:500]}") from exc
        else:
            return docs

    def _spans(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        docs = self._search_all(self.index, {"bool": {"filter": [query], "must_not": self._harness()}})
        return [s for s in map(from_span_document, docs) if not is_harness(s, self.exclude)]

    # -- the contract -----------------------------------------------------------------------------

    def fetch(self, run: RunRef) -> Fetched:
        if run.trace_id:
            spans = self._spans(_any(_term("traceId", run.trace_id)))
            if spans:
                return Fetched(spans, "trace_id", run.trace_id)
        spans = self._spans(self._run_id_clause([run.run_id]))
        if spans:
            return Fetched(spans, "run_id", run.run_id)
        return self._fetch_window(run)

    def _fetch_window(self, run: RunRef) -> Fetched:
        if not (run.service and run.started_at):
            return Fetched()
        lo, hi = run.window_ms(self.slack_s)
        window = {
            "bool": {
                "filter": [
                    _any([c for f in SERVICE_FIELDS for c in _term(f, run.service)]),
                    {"range": {"startTime": {"gte": iso(lo), "lte": iso(hi)}}},
                ]
            }
        }
        chosen = best_trace_in_window(self._spans(window), run)
        if not chosen:
            return Fetched()
        trace_id = chosen[0].get("trace_id")
        return Fetched(self._spans(_any(_term("traceId", trace_id))), "time_window", trace_id)

    def fetch_many(self, runs: Iterable[RunRef]) -> dict[str, Fetched]:
        """Batched: one scrolled query per `batch_size` runs (trace ids and run ids together);
        only runs found by neither fall back to a per-run time-window query."""
        runs = list(runs)
        out: dict[str, Fetched] = {}
        for i in range(0, len(runs), self.batch_size):
            batch = runs[i : i + self.batch_size]
            by_trace = {r.trace_id: r for r in batch if r.trace_id}
            by_run = {r.run_id: r for r in batch}
            clauses = _terms("traceId", list(by_trace)) if by_trace else []
            clauses.append(self._run_id_clause(list(by_run)))
            found_trace: dict[str, list[dict[str, Any]]] = {}
            found_run: dict[str, list[dict[str, Any]]] = {}
            for s in self._spans(_any(clauses)):
                if s.get("trace_id") in by_trace:
                    found_trace.setdefault(by_trace[s["trace_id"]].run_id, []).append(s)
                attrs = s.get("attributes") or {}
                for a in self.run_id_attributes:
                    rid = attrs.get(a)
                    if rid is not None and str(rid) in by_run:
                        found_run.setdefault(str(rid), []).append(s)
                        break
            for r in batch:
                if r.run_id in found_trace:
                    out[r.run_id] = Fetched(found_trace[r.run_id], "trace_id", r.trace_id)
                elif r.run_id in found_run:
                    out[r.run_id] = Fetched(found_run[r.run_id], "run_id", r.run_id)
                else:
                    out[r.run_id] = self._fetch_window(r)
        return out

    def logs(self, run: RunRef, found: Fetched) -> list[dict[str, Any]]:
        if not found.correlation:
            return []
        docs = self._search_all(self.logs_index, self._run_filter(run, found, scope="log"))
        logs = [from_log_document(d) for d in docs]
        logs = [rec for rec in logs if rec.get("service") not in self.exclude]
        return sorted(logs, key=lambda rec: rec.get("time_ms") or 0)

    def search(self, run: RunRef, found: Fetched, body: dict[str, Any]) -> list[dict[str, Any]]:
        scoped = dsl.scoped(body, self._run_filter(run, found), self._harness())
        try:
            resp = self.client.search(index=self.index, body=scoped, ignore_unavailable=True, allow_no_indices=True)
        except Exception as exc:
            raise TraceSourceError(
                f"{self.describe()}: query failed: {type(exc).__name__}: {redact_url(str(exc))[:500]}"
            ) from exc
        return [h["_source"] for h in resp["hits"]["hits"]]
