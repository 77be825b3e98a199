"""The OpenSearch trace source against a real single-node OpenSearch, with span documents built
from spans the OpenTelemetry SDK produced, in the Data Prepper flat and nested forms."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from opensearchpy import OpenSearch, helpers

from agent_health.traces.dataprepper import to_log_document, to_span_document
from agent_health.traces.dsl import QueryRejected
from agent_health.traces.opensearch import OpenSearchTraceSource
from agent_health.traces.source import RunRef
from agent_health.traces.view import TracesUnavailable, TracesView

from .otel_runs import RecordedRun, Recorder

FORMS = ("flat", "nested")
run = asyncio.run
NOW = time.time() - 600


def _create_indices(client: OpenSearch, form: str) -> None:
    spans, logs = f"otel-v1-apm-span-{form}", f"logs-otel-v1-{form}"
    for name in (spans, logs):
        if client.indices.exists(index=name):
            client.indices.delete(index=name)
    if form == "flat":  # like Data Prepper's template: ids and attribute strings are keywords
        body: dict[str, Any] = {
            "mappings": {
                "dynamic_templates": [{"strings": {"match_mapping_type": "string", "mapping": {"type": "keyword"}}}],
                "properties": {"startTime": {"type": "date"}, "endTime": {"type": "date"}},
            }
        }
    else:  # a hand-made index with dynamic mapping: strings become text with a .keyword subfield
        body = {"mappings": {"properties": {"startTime": {"type": "date"}, "endTime": {"type": "date"}}}}
    client.indices.create(index=spans, body={"settings": {"number_of_replicas": 0}, **body})
    client.indices.create(index=logs, body={"settings": {"number_of_replicas": 0}, **body})


@pytest.fixture(scope="module")
def dataset(opensearch_url: str) -> dict[str, Any]:
    """Runs recorded with the OTel SDK and indexed in both forms."""
    rec = Recorder()
    runs: dict[str, RecordedRun] = {
        # the agent continued the harness's trace (traceparent) and tags spans with the run id
        "trace": rec.run(
            "run-trace",
            start_s=NOW,
            calls=[(1200, 80), (1500, 120), (1700, 300)],
            tools=["search_logs", "get_metrics"],
            failing_tool="get_metrics",
        ),
        "other": rec.run("run-other", start_s=NOW + 0.5, calls=[(900, 50), (950, 60)], tools=["search_logs"]),
        # the agent ignored traceparent but set the run id attribute / the conversation id
        "run_id": rec.run(
            "run-attr", start_s=NOW + 20, calls=[(300, 30)], tools=["query_traces"], follow_traceparent=False
        ),
        "conversation": rec.run(
            "run-conv",
            start_s=NOW + 40,
            calls=[(400, 40), (410, 41)],
            tools=["a"],
            follow_traceparent=False,
            run_attr="gen_ai.conversation.id",
        ),
        # no trace id, no attribute: only the service and the time window; two runs overlap
        "win_a": rec.run(
            "run-win-a",
            service="window-agent",
            start_s=NOW + 60,
            calls=[(100, 10)] * 3,
            tools=["x", "y"],
            follow_traceparent=False,
            run_attr=None,
            harness=False,
            step_ms=200,
        ),
        "win_b": rec.run(
            "run-win-b",
            service="window-agent",
            start_s=NOW + 60.4,
            calls=[(700, 70)] * 2,
            tools=["z"],
            follow_traceparent=False,
            run_attr=None,
            harness=False,
            step_ms=300,
        ),
    }
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    for form in FORMS:
        _create_indices(client, form)
        actions = [
            {"_index": f"otel-v1-apm-span-{form}", "_source": to_span_document(s, form)}
            for r in runs.values()
            for s in r.spans
        ]
        logs = [
            {
                "trace_id": runs["trace"].trace_id,
                "span_id": runs["trace"].spans[0]["span_id"],
                "time_ms": NOW * 1000 + 5,
                "severity": "ERROR",
                "body": "get_metrics failed: unknown metric",
                "service": "rca-agent",
                "attributes": {},
            },
            {
                "trace_id": runs["other"].trace_id,
                "span_id": "x",
                "time_ms": NOW * 1000 + 6,
                "severity": "INFO",
                "body": "other run's log",
                "service": "rca-agent",
                "attributes": {},
            },
            {
                "trace_id": "f" * 32,
                "span_id": "y",
                "time_ms": (NOW + 20) * 1000 + 5,
                "severity": "INFO",
                "body": "run-attr log line",
                "service": "rca-agent",
                "attributes": {"agent_health.run.id": "run-attr"},
            },
        ]
        actions += [{"_index": f"logs-otel-v1-{form}", "_source": to_log_document(rec_, form)} for rec_ in logs]
        helpers.bulk(client, actions, refresh=True)
    client.close()
    return {"url": opensearch_url, "runs": runs}


@pytest.fixture(params=FORMS)
def source(request: pytest.FixtureRequest, dataset: dict[str, Any]) -> OpenSearchTraceSource:
    form = request.param
    src = OpenSearchTraceSource(
        {"url": dataset["url"], "index": f"otel-v1-apm-span-{form}", "logs_index": f"logs-otel-v1-{form}"}
    )
    yield src
    src.close()


def ref(run: RecordedRun, *, sent: bool = True) -> RunRef:
    return RunRef(
        run_id=run.run_id,
        trace_id=run.sent_trace_id if sent else None,
        agent="rca@v1",
        service=run.service,
        started_at=run.started_at,
        duration_ms=run.duration_ms,
    )


def test_correlates_by_the_runs_trace_id_and_excludes_harness_spans(source, dataset):
    run = dataset["runs"]["trace"]
    found = source.fetch(ref(run))
    assert found.correlation == "trace_id"
    assert {s["service"] for s in found.spans} == {"rca-agent"}  # no harness test span, no judge span
    assert len(found.spans) == run.expected["agent_spans"]
    assert {s["trace_id"] for s in found.spans} == {run.sent_trace_id}


def test_usage_is_counted_once_when_the_run_span_carries_the_sum(source, dataset):
    run = dataset["runs"]["trace"]
    view = TracesView(source, ref(run), wait_s=0)
    assert view.input_tokens == run.expected["input_tokens"] == 4400  # not 8800, not + the judge's 5000
    assert view.output_tokens == run.expected["output_tokens"]
    assert view.llm_calls == 3 and view.tool_calls == 2
    assert view.metrics()["tool_errors"] == 1
    assert view.cost == pytest.approx((4400 * 0.15 + 500 * 0.60) / 1e6)
    assert view.span_duration("execute_tool search_logs") == pytest.approx(100, abs=1)


@pytest.mark.parametrize(
    "key,attribute", [("run_id", "agent_health.run.id"), ("conversation", "gen_ai.conversation.id")]
)
def test_correlates_by_run_id_attribute_when_the_trace_id_does_not_match(source, dataset, key, attribute):
    run = dataset["runs"][key]
    assert run.trace_id != run.sent_trace_id  # the agent started its own trace
    found = source.fetch(ref(run))
    assert found.correlation == "run_id"
    assert len(found.spans) == run.expected["agent_spans"]
    assert all(s["attributes"][attribute] == run.run_id for s in found.spans)


def test_time_window_fallback_keeps_two_overlapping_runs_apart(source, dataset):
    a, b = dataset["runs"]["win_a"], dataset["runs"]["win_b"]
    assert b.started_at < a.started_at + a.duration_ms / 1000  # they overlap
    found_a, found_b = source.fetch(ref(a, sent=False)), source.fetch(ref(b, sent=False))
    assert found_a.correlation == found_b.correlation == "time_window"
    assert {s["trace_id"] for s in found_a.spans} == {a.trace_id}
    assert {s["trace_id"] for s in found_b.spans} == {b.trace_id}
    assert TracesView(source, ref(a, sent=False), wait_s=0).input_tokens == 300
    assert TracesView(source, ref(b, sent=False), wait_s=0).input_tokens == 1400


def test_logs_are_correlated_like_spans(source, dataset):
    runs = dataset["runs"]
    view = TracesView(source, ref(runs["trace"]), wait_s=0)
    assert [rec["body"] for rec in view.logs] == ["get_metrics failed: unknown metric"]
    view = TracesView(source, ref(runs["run_id"]), wait_s=0)
    assert [rec["body"] for rec in view.logs] == ["run-attr log line"]


def test_batched_fetch_uses_one_query_for_many_runs(source, dataset):
    runs = dataset["runs"]
    refs = [ref(runs[k]) for k in ("trace", "other", "run_id", "conversation")]
    calls: list[Any] = []
    search = source.client.search
    source.client.search = lambda *a, **k: calls.append(k) or search(*a, **k)  # count real requests
    try:
        found = source.fetch_many(refs)
    finally:
        source.client.search = search
    assert len(calls) == 1
    assert {k: v.correlation for k, v in found.items()} == {
        "run-trace": "trace_id",
        "run-other": "trace_id",
        "run-attr": "run_id",
        "run-conv": "run_id",
    }
    assert len(found["run-trace"].spans) == runs["trace"].expected["agent_spans"]


def test_query_tool_sees_only_this_runs_spans(source, dataset):
    runs = dataset["runs"]
    tools = TracesView(source, ref(runs["trace"]), wait_s=0).tools
    everything = run(tools.query({"query": {"match_all": {}}, "size": 1000}))
    assert {d["traceId"] for d in everything} == {runs["trace"].sent_trace_id}
    assert len(everything) == runs["trace"].expected["agent_spans"]  # harness spans stay hidden
    other = runs["other"].sent_trace_id
    assert run(tools.query({"query": {"term": {"traceId": other}}})) == []
    assert (
        run(
            tools.query(
                {"query": {"bool": {"should": [{"match_all": {}}, {"term": {"traceId": other}}]}}, "size": 1000}
            )
        )
        == everything
    )
    assert run(tools.metrics())["input_tokens"] == 4400
    assert len(run(tools.get_spans())) == runs["trace"].expected["agent_spans"]


@pytest.mark.parametrize(
    "body,needle",
    [
        ({"query": {"script": {"script": {"source": "doc['x'].value > 0"}}}}, "scripts are not allowed"),
        ({"query": {"function_score": {"script_score": {"script": "1"}}}}, "scripts are not allowed"),
        ({"query": {"match_all": {}}, "script_fields": {"f": {"script": "1"}}}, "only a search is allowed"),
        ({"query": {"match_all": {}}, "runtime_mappings": {"f": {"type": "long"}}}, "only a search"),
        (
            {"query": {"terms": {"traceId": {"index": "otel-v1-apm-span-flat", "id": "1", "path": "traceId"}}}},
            "'index' is not allowed",
        ),
        ({"query": {"match_all": {}}, "aggs": {"all": {"global": {}}}}, "only a search"),
        ({"doc": {"traceId": "x"}}, "only a search"),
        ({"query": {"wrapper": {"query": "eyJtYXRjaF9hbGwiOnt9fQ=="}}}, "'wrapper' is not allowed"),
        (
            {"query": {"match_all": {}}, "sort": [{"_script": {"type": "number", "script": "1"}}]},
            "scripts are not allowed",
        ),
        ({"script": {"source": "ctx._source.name = 'x'"}, "query": {"match_all": {}}}, "only a search"),
        ("DELETE /otel-v1-apm-span-flat", "must be a search body"),
    ],
)
def test_query_tool_rejects_scripts_lookups_and_writes(source, dataset, body, needle):
    client = OpenSearch(hosts=[dataset["url"]])
    before = client.count(index=source.index)["count"]
    tools = TracesView(source, ref(dataset["runs"]["trace"]), wait_s=0).tools
    with pytest.raises(QueryRejected, match=needle):
        run(tools.query(body))
    assert client.count(index=source.index)["count"] == before
    client.close()


def test_unavailable_traces_name_the_run_and_endpoint_within_the_wait(source):
    missing = RunRef(
        run_id="run-missing", trace_id="0" * 32, agent="rca@v1", service="nobody", started_at=NOW, duration_ms=100
    )
    view = TracesView(source, missing, wait_s=0.6, poll_s=0.2)
    t0 = time.monotonic()
    with pytest.raises(TracesUnavailable, match=r"traces unavailable for run run-missing .*otel-v1-apm-span"):
        _ = view.total_tokens
    assert 0.5 <= time.monotonic() - t0 < 5


def test_unreachable_opensearch_is_unavailable_and_never_shows_the_password(monkeypatch):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TRACE_PW", "s3cr3t-pw")
    src = OpenSearchTraceSource(
        {
            "url": f"http://admin:s3cr3t-pw@127.0.0.1:{port}",
            "timeout_s": 1,
            "auth": {"type": "basic", "username": "admin", "password_env": "TRACE_PW"},
        }
    )
    view = TracesView(src, RunRef(run_id="run-x", trace_id="1" * 32, agent="rca@v1"), wait_s=0.3, poll_s=0.1)
    with pytest.raises(TracesUnavailable) as info:
        view.load()
    message = str(info.value)
    assert "traces unavailable for run run-x" in message and f"127.0.0.1:{port}" in message
    assert "ConnectionError" in message and "s3cr3t-pw" not in message
