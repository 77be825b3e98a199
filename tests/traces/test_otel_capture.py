"""OpenTelemetry with no backend (`traces.source: otel`): a subprocess agent exporting OTLP/HTTP
through the standard exporter, and an in-process pydantic-ai agent with its own instrumentation,
give `result.traces`, the derived metrics and a trace_query judge their spans, with no OpenSearch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent_health import define_config, load_tests, run_tests
from agent_health.model import RunSettings
from tests.judges.helpers import ScriptedServer, chat, verdict_json

HERE = Path(__file__).parent

EVAL = """
from agent_health import expect, test

@test("traced", prompt="Why is the payment service failing?")
async def traced(agent, judge):
    result = await agent.run()
    t = result.traces
    await t.aload()
    expect(t.input_tokens).to_equal({input_tokens})
    expect(t.output_tokens).to_equal({output_tokens})
    expect(t.llm_calls).to_equal(2)
    expect(t.tool_calls).to_equal(1)
    await judge(result, {{"criteria": "the diagnosis is grounded in the trace", "tools": ["trace_query"]}})
"""


@pytest.fixture(scope="module")
def judge_server():
    server = ScriptedServer()
    yield server
    server.close()


def run_one(tmp_path: Path, judge_server: ScriptedServer, agent: dict, tokens: tuple[object, object]):
    judge_server.requests.clear()
    judge_server.script.extend(
        [
            chat(None, tool_calls=[{"name": "query", "args": {"dsl": {"query": {"match": {"name": "execute_tool"}}}}}]),
            chat(verdict_json(True, 0.9, "the tool span shows the search")),
        ]
    )
    (tmp_path / "evals").mkdir()
    body = EVAL.format(input_tokens=tokens[0], output_tokens=tokens[1])
    (tmp_path / "evals" / "traced.eval.py").write_text(body)
    config = define_config(
        root=str(tmp_path),
        agents=[{**agent, "versions": {"v1": {}}, "traces": True}],
        default_agent=f"{agent['key']}@v1",
        traces={"source": "otel", "wait_s": 20},
        judge={"provider": "openai", "model": "judge-model", "settings": {"base_url": judge_server.url + "/v1"}},
    )
    tests = load_tests([tmp_path / "evals"]).tests
    (result,) = run_tests(tests, config, settings=RunSettings(store=None))
    return result


def judge_saw(judge_server: ScriptedServer) -> list[str]:
    """The span names the judge's query tool gave the judge model."""
    second = judge_server.posts()[1].json
    (tool_message,) = [m for m in second["messages"] if m["role"] == "tool"]
    return sorted(set(__import__("re").findall(r'"name": "([^"]+)"', tool_message["content"])))


def test_a_subprocess_agent_exporting_otlp_gives_the_run_its_spans(tmp_path, judge_server):
    agent = {
        "key": "sub",
        "connector": "subprocess",
        "settings": {"command": [sys.executable, str(HERE / "otlp_agent.py")], "timeout_s": 60},
    }
    result = run_one(tmp_path, judge_server, agent, (1200, 80))
    assert result.status == "passed", (result.error, [(s.name, s.reasoning) for s in result.signals])
    traces = result.metrics["traces"]
    assert traces["status"] == "ok" and traces["correlation"] == "run_id"  # by the run's own receiver endpoint
    assert (traces["total_tokens"], traces["llm_calls"], traces["tool_calls"], traces["tool_errors"]) == (1280, 2, 1, 1)
    assert traces["cost_usd"] > 0  # gpt-4o-mini, from the price table
    assert judge_saw(judge_server) == ["execute_tool search_logs"]
    (verdict,) = [s for s in result.signals if s.kind == "judge"]
    assert verdict.passed and verdict.score == 0.9


def test_an_in_process_pydantic_ai_agent_gives_the_run_its_own_spans(tmp_path, judge_server):
    agent = {
        "key": "pyai",
        "connector": "pydantic_ai",
        "settings": {"agent": "tests.connectors.framework_agents.sre_pydantic_ai_traced:agent"},
    }
    # the spans say what the run's messages say
    result = run_one(tmp_path, judge_server, agent, ("result.usage.input_tokens", "result.usage.output_tokens"))
    assert result.status == "passed", (result.error, [(s.name, s.reasoning) for s in result.signals])
    traces = result.metrics["traces"]
    assert traces["status"] == "ok" and traces["correlation"] == "trace_id"  # the run's trace, continued in process
    assert traces["tool_histogram"] == {"search_logs": 1}
    assert result.run.usage.input_tokens > 0 and traces["input_tokens"] == result.run.usage.input_tokens
    assert judge_saw(judge_server) == ["execute_tool search_logs"]
    spans = json.dumps(traces)
    assert "sre-function-model" in spans


def test_the_documented_otel_configuration_captures_a_subprocess_agent(tmp_path):
    import shutil

    from agent_health import load_config
    from tests.core.test_docs_examples import block

    shutil.copy(HERE / "otlp_agent.py", tmp_path / "rca_agent.py")
    (tmp_path / "agent_health_config.py").write_text(
        block("traces.md", "# agent_health_config.py: spans straight from OpenTelemetry")
    )
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "rca.eval.py").write_text(
        "from agent_health import expect, test\n\n"
        "@test('rca', prompt='Why is the payment service failing?')\n"
        "async def rca(agent):\n"
        "    result = await agent.run()\n"
        "    await result.traces.aload()\n"
        "    expect(result.traces.total_tokens).to_equal(1280)\n"
    )
    config = load_config(tmp_path / "agent_health_config.py")
    (result,) = run_tests(load_tests([tmp_path / "evals"]).tests, config, settings=RunSettings(store=None))
    assert result.status == "passed", (result.error, [(s.name, s.reasoning) for s in result.signals])
    spans = result.metrics["traces"]
    assert spans["spans"] == 4
    assert spans["by_model"] == {"gpt-4o-mini": {"input_tokens": 1200, "output_tokens": 80, "calls": 2}}


def test_the_receiver_takes_otlp_json_and_gzip_and_refuses_what_is_not_otlp(tmp_path):
    import gzip

    import httpx
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    from agent_health.traces.capture import OTelCapture
    from agent_health.traces.local import LocalSpanStore

    store = LocalSpanStore(tmp_path / "spans")
    capture = OTelCapture(store, in_process=False)
    try:
        url = capture.base_url + "/runs/run-json/v1/traces"
        span = {
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": "eee19b7ec3c1b174",
            "name": "chat gpt-4o-mini",
            "startTimeUnixNano": "1764500000000000000",
            "endTimeUnixNano": "1764500000850000000",
            "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "1200"}}],
        }
        service = {"key": "service.name", "value": {"stringValue": "rca"}}
        doc = {"resourceSpans": [{"resource": {"attributes": [service]}, "scopeSpans": [{"spans": [span]}]}]}
        r = httpx.post(url, json=doc)
        assert (r.status_code, r.json()) == (200, {})
        (stored,) = store.by_run_id("run-json")
        assert stored["service"] == "rca" and stored["duration_ms"] == 850.0
        assert stored["attributes"] == {"gen_ai.usage.input_tokens": 1200, "agent_health.run.id": "run-json"}

        message = trace_service_pb2.ExportTraceServiceRequest()
        message.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="x")
        r = httpx.post(
            capture.base_url + "/runs/run-gz/v1/traces",
            content=gzip.compress(message.SerializeToString()),
            headers={"content-type": "application/x-protobuf", "content-encoding": "gzip"},
        )
        assert r.status_code == 200 and [s["name"] for s in store.by_run_id("run-gz")] == ["x"]

        r = httpx.post(url, content=b"\xff not protobuf", headers={"content-type": "application/x-protobuf"})
        assert r.status_code == 400 and r.text.startswith("malformed OTLP traces request: ")
        assert httpx.post(capture.base_url + "/v1/traces", content=b"").status_code == 404  # not a run's endpoint
    finally:
        capture.close()


def test_an_http_agent_exports_to_the_endpoint_its_request_carries(tmp_path):
    """An HTTP agent gets its run's endpoint in the request body's `env` and exports there with
    the standard exporter, after answering (as a server's batch processor would)."""
    import threading

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from tests.support import LocalHTTPServer, QuietHandler

    def export(endpoint: str) -> None:
        provider = TracerProvider(resource=Resource.create({"service.name": "rca-http"}))
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces")))
        with provider.get_tracer("rca").start_as_current_span("chat gpt-4o-mini") as span:
            span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"})
            span.set_attributes({"gen_ai.usage.input_tokens": 300, "gen_ai.usage.output_tokens": 20})
        provider.shutdown()

    class Agent(QuietHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            data = json.dumps({"output": "The payment service cannot reach its database."}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            threading.Thread(target=export, args=(body["env"]["OTEL_EXPORTER_OTLP_ENDPOINT"],)).start()

    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "rca.eval.py").write_text(
        "from agent_health import expect, test\n\n"
        "@test('rca', prompt='Why is the payment service failing?')\n"
        "async def rca(agent):\n"
        "    result = await agent.run()\n"
        "    await result.traces.aload()\n"
        "    expect(result.traces.total_tokens).to_equal(320)\n"
        "    expect(result.traces.correlation).to_equal('run_id')\n"
    )
    with LocalHTTPServer(Agent) as agent:
        config = define_config(
            root=str(tmp_path),
            agents=[
                {
                    "key": "rca",
                    "connector": "http",
                    "settings": {"endpoint": agent.url + "/invoke"},
                    "versions": {"v1": {}},
                    "traces": True,
                }
            ],
            default_agent="rca@v1",
            traces={"source": "otel", "wait_s": 20},
        )
        (result,) = run_tests(load_tests([tmp_path / "evals"]).tests, config, settings=RunSettings(store=None))
    assert result.status == "passed", (result.error, [(s.name, s.reasoning) for s in result.signals])


def test_a_run_with_its_own_otlp_endpoint_is_replayed_by_its_recording(tmp_path):
    """The endpoint in a run's env changes with every run: it is no part of the recording's key."""
    import shutil

    from agent_health import load_config
    from tests.core.test_docs_examples import block

    shutil.copy(HERE / "otlp_agent.py", tmp_path / "rca_agent.py")
    (tmp_path / "agent_health_config.py").write_text(
        block("traces.md", "# agent_health_config.py: spans straight from OpenTelemetry")
    )
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "rca.eval.py").write_text(
        "from agent_health import test\n\n@test('rca', prompt='Why?')\nasync def rca(agent):\n    await agent.run()\n"
    )
    config = load_config(tmp_path / "agent_health_config.py")
    tests = load_tests([tmp_path / "evals"]).tests
    runs = [run_tests(tests, config, settings=RunSettings(store=None), replay="auto")[0].run for _ in range(2)]
    assert [r.replayed for r in runs] == [False, True]
    assert runs[1].run_id == runs[0].run_id  # the recorded run, whose spans are the original run's
