"""Fetching spans and deriving trace metrics for 1,000 runs from OpenSearch (issue 6 target: at
most 2 s against the local node, in batched queries rather than one per run).

Indexes 1,000 runs (a run span, 4 model calls, 3 tool calls, plus 2 harness spans each, ~10,000
documents in the Data Prepper flat form), then prints:
- the time and number of search requests of `fetch_many` + `span_metrics` for all 1,000 runs;
- for comparison, the per-run time of one-query-per-run fetching (on 100 runs).

Usage: python benchmarks/traces_opensearch.py [--url http://127.0.0.1:9200] [--runs 1000]
Without --url it builds and starts the test node of tests/services/opensearch (Java 17 + Maven).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "services" / "opensearch"))

INDEX = "otel-v1-apm-span-bench"


def make_run(i: int, t0_ms: float) -> tuple[Any, list[dict[str, Any]]]:
    from agent_health.traces.source import RunRef

    trace_id, run_id = os.urandom(16).hex(), f"bench-{i:05d}"
    start = t0_ms + i * 50.0
    root, harness = os.urandom(8).hex(), os.urandom(8).hex()
    base = {"trace_id": trace_id, "kind": "SPAN_KIND_INTERNAL", "status": "OK"}
    spans = [
        {
            **base,
            "span_id": harness,
            "parent_span_id": None,
            "name": "agent_health.test",
            "service": "agent-health",
            "start_ms": start,
            "end_ms": start + 900,
            "duration_ms": 900.0,
            "attributes": {"agent_health.run.id": run_id},
        },
        {
            **base,
            "span_id": root,
            "parent_span_id": harness,
            "name": "invoke_agent bench",
            "service": "bench-agent",
            "start_ms": start + 1,
            "end_ms": start + 800,
            "duration_ms": 799.0,
            "attributes": {
                "gen_ai.operation.name": "invoke_agent",
                "agent_health.run.id": run_id,
                "gen_ai.usage.input_tokens": 4000,
                "gen_ai.usage.output_tokens": 400,
            },
        },
    ]
    for k in range(4):
        spans.append(
            {
                **base,
                "span_id": os.urandom(8).hex(),
                "parent_span_id": root,
                "name": "chat gpt-4o-mini",
                "service": "bench-agent",
                "start_ms": start + 2 + k * 150,
                "end_ms": start + 100 + k * 150,
                "duration_ms": 98.0,
                "attributes": {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 1000,
                    "gen_ai.usage.output_tokens": 100,
                    "agent_health.run.id": run_id,
                },
            }
        )
    for k, tool in enumerate(("search_logs", "get_metrics", "query_traces")):
        spans.append(
            {
                **base,
                "span_id": os.urandom(8).hex(),
                "parent_span_id": root,
                "name": f"execute_tool {tool}",
                "service": "bench-agent",
                "start_ms": start + 100 + k * 150,
                "end_ms": start + 150 + k * 150,
                "duration_ms": 50.0,
                "attributes": {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "agent_health.run.id": run_id,
                },
            }
        )
    spans.append(
        {
            **base,
            "span_id": os.urandom(8).hex(),
            "parent_span_id": harness,
            "name": "chat judge",
            "service": "agent-health",
            "start_ms": start + 800,
            "end_ms": start + 900,
            "duration_ms": 100.0,
            "attributes": {
                "agent_health.harness": True,
                "gen_ai.usage.input_tokens": 3000,
                "gen_ai.usage.output_tokens": 300,
            },
        }
    )
    ref = RunRef(
        run_id=run_id,
        trace_id=trace_id,
        agent="bench@v1",
        service="bench-agent",
        started_at=start / 1000,
        duration_ms=900,
    )
    return ref, spans


def index_runs(url: str, n: int) -> list[Any]:
    from opensearchpy import OpenSearch, helpers

    from agent_health.traces.dataprepper import to_span_document

    client = OpenSearch(hosts=[url], timeout=60)
    if client.indices.exists(index=INDEX):
        client.indices.delete(index=INDEX)
    client.indices.create(
        index=INDEX,
        body={
            "settings": {"number_of_replicas": 0, "number_of_shards": 1},
            "mappings": {
                "dynamic_templates": [{"strings": {"match_mapping_type": "string", "mapping": {"type": "keyword"}}}],
                "properties": {"startTime": {"type": "date"}, "endTime": {"type": "date"}},
            },
        },
    )
    t0 = time.time() * 1000 - 3_600_000
    refs, actions = [], []
    for i in range(n):
        ref, spans = make_run(i, t0)
        refs.append(ref)
        actions += [{"_index": INDEX, "_source": to_span_document(s, "flat")} for s in spans]
    helpers.bulk(client, actions, refresh=True, chunk_size=2000)
    client.close()
    return refs


def measure(url: str, refs: list[Any]) -> None:
    from agent_health.traces.opensearch import OpenSearchTraceSource
    from agent_health.traces.spans import span_metrics

    source = OpenSearchTraceSource({"url": url, "index": INDEX, "timeout_s": 60})
    source.fetch(refs[0])  # connect and warm the node's caches once, outside the timing
    calls = {"search": 0, "scroll": 0}
    search, scroll = source.client.search, source.client.scroll

    def counting_search(*a: Any, **k: Any) -> Any:
        calls["search"] += 1
        return search(*a, **k)

    def counting_scroll(*a: Any, **k: Any) -> Any:
        calls["scroll"] += 1
        return scroll(*a, **k)

    source.client.search, source.client.scroll = counting_search, counting_scroll
    best = None
    for _ in range(3):
        calls.update(search=0, scroll=0)
        t = time.perf_counter()
        found = source.fetch_many(refs)
        metrics = {run_id: span_metrics(f.spans) for run_id, f in found.items()}
        elapsed = time.perf_counter() - t
        best = elapsed if best is None else min(best, elapsed)
    assert len(metrics) == len(refs)
    bad = [r for r, m in metrics.items() if m["input_tokens"] != 4000 or m["llm_calls"] != 4 or m["tool_calls"] != 3]
    assert not bad, f"wrong metrics for {len(bad)} runs, e.g. {bad[:3]}"
    print(
        f"fetch + derive metrics, {len(refs)} runs ({sum(len(f.spans) for f in found.values())} spans): "
        f"{best:.3f} s (best of 3), {calls['search']} search + {calls['scroll']} scroll requests "
        f"[target <= 2 s]"
    )
    sample = refs[:100]
    t = time.perf_counter()
    for r in sample:
        span_metrics(source.fetch(r).spans)
    per_run = (time.perf_counter() - t) / len(sample)
    print(
        f"one query per run, for comparison: {per_run * 1000:.1f} ms/run "
        f"(~{per_run * len(refs):.2f} s for {len(refs)} runs)"
    )
    source.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an OpenSearch to use (default: start the test node)")
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    if args.url:
        measure(args.url, index_runs(args.url, args.runs))
        return
    from node import running_node

    with running_node() as url:
        t = time.perf_counter()
        refs = index_runs(url, args.runs)
        print(f"indexed {args.runs} runs in {time.perf_counter() - t:.1f} s on {url}")
        measure(url, refs)


if __name__ == "__main__":
    main()
