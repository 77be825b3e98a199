"""The built-in demo agent: deterministic, offline, incident/RCA flavoured.

Versions differ the way real agent builds do, so a benchmark has something to find:

- `v1` is quick and shallow: it searches the logs once and reports the first error it sees. It
  gets the root cause when the logs say it outright, misses it when it needs metrics or traces,
  and ignores a failing tool call on one scenario.
- `v2` investigates: logs, then metrics, then traces. It finds root causes v1 misses, spends
  roughly three times the tokens, repeats one search on the queue scenario, and over-thinks the
  DNS scenario, where it blames the network instead of the missing record.

In a conversation (`agent.run(turns=...)` or a simulated user) they differ again:

- `v1` reads only the latest user message (it forgets what was said before) and never asks: on a
  vague report it searches the logs at once and finds nothing specific.
- `v2` reads the whole conversation, asks which service and symptom a vague report is about
  before it calls any tool, and answers a follow-up on a diagnosis it already gave from the
  conversation, without investigating again.

`latency_ms` (setting, or AGENT_HEALTH_DEMO_LATENCY_MS) adds a simulated per-run latency.
With `spans_dir` (set by the session when traces are kept locally) each run also writes
OpenTelemetry-shaped spans there: an agent run span, one span per model call with `gen_ai.*`
usage, and one span per tool call, keyed by the run's trace id and run id.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_health.connectors.base import Connector, random_hex
from agent_health.errors import ConfigError
from agent_health.lazy import deferred
from agent_health.model import RunResult, Step, Usage
from agent_health.model.agent import AgentRequest, ResolvedAgent
from agent_health.model.limits import LATENCY_MAX_MS, check_number
from agent_health.model.run import Role, StepKind

# the demo agent writes spans only when its settings give a spans_dir
if TYPE_CHECKING:
    import agent_health.traces.local as traces_local
else:
    traces_local = deferred("agent_health.traces.local")


VERSIONS = {"v1": "demo-sre-small", "v2": "demo-sre-large"}


@dataclass(frozen=True)
class Scenario:
    key: str
    keywords: tuple[str, ...]
    service: str
    log_line: str
    metric: tuple[str, str]
    trace_finding: str
    shallow_answer: str
    deep_answer: str
    v1_tool_error: bool = False
    v2_repeats_search: bool = False
    v2_wrong: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "payment_db",
        ("payment", "db-primary", "5432", "card"),
        "payment-service",
        "ERROR payment-service: Connection refused to db-primary:5432 (pool exhausted, 50/50 in use)",
        ("db_connections_active", "50 of 50 connections in use since 14:02 UTC; db-primary failover at 14:01"),
        "span payment-service -> db-primary:5432 failed: connection refused (1,204 errors in 5 min)",
        "The payment-service is failing because it cannot reach its database: connections to "
        "db-primary:5432 are refused. Restart payment-service.",
        "Root cause: the payment-service cannot reach its database. After the db-primary failover at "
        "14:01 UTC the connection pool to db-primary:5432 was exhausted (50/50 connections in use) and "
        "new connections are refused. Remediation: recycle the connection pool, point the service at the "
        "new primary, and raise the pool limit with a connection timeout.",
    ),
    Scenario(
        "checkout_latency",
        ("checkout", "latency", "slow", "p99"),
        "checkout-service",
        "WARN checkout-service: request took 4200ms (threshold 1000ms)",
        ("cache_hit_ratio", "redis cache hit ratio fell from 0.97 to 0.12 at 09:15 after the TTL config change"),
        "span checkout-service -> redis GET: cache miss, fallback to catalog-db 3.9s",
        "Checkout is slow because the checkout-service pods are under high CPU load. Scale out checkout-service.",
        "Root cause: a cache configuration change at 09:15 lowered the redis TTL, so the cache hit ratio "
        "dropped from 0.97 to 0.12 and checkout falls back to catalog-db on almost every request (3.9s). "
        "Remediation: revert the TTL change and add an alert on the cache hit ratio.",
    ),
    Scenario(
        "auth_5xx",
        ("auth", "login", "401", "certificate", "tls", "sign-in"),
        "auth-service",
        "ERROR auth-service: upstream identity-provider handshake failed",
        ("tls_handshake_errors", "tls handshake errors 100% since 00:00 UTC"),
        "span auth-service -> identity-provider: x509 certificate has expired (NotAfter 00:00 UTC)",
        "Logins fail because the auth-service is returning errors. Restart the auth-service.",
        "Root cause: the identity provider's TLS certificate expired at 00:00 UTC, so every handshake from "
        "auth-service fails and logins return 5xx. Remediation: renew and rotate the certificate, and "
        "alert on certificate expiry 14 days ahead.",
    ),
    Scenario(
        "oom",
        ("memory", "oom", "crashloop", "restart", "image-resizer"),
        "image-resizer",
        "ERROR kubelet: image-resizer container OOMKilled (limit 512Mi), restart count 14",
        ("container_memory_working_set", "memory grows 40Mi per 1k requests since deploy v3.2"),
        "span image-resizer resize(): buffers retained after response (v3.2)",
        "The image-resizer pods are OOMKilled. Increase the memory limit of image-resizer.",
        "Root cause: a memory leak introduced in image-resizer v3.2: buffers are retained after each "
        "response, so memory grows until the container is OOMKilled. Remediation: roll back to v3.1 and "
        "fix the buffer release; raising the limit only delays the crash.",
    ),
    Scenario(
        "dns",
        ("dns", "nxdomain", "resolve", "inventory"),
        "inventory-service",
        "ERROR inventory-service: lookup inventory-db.internal: NXDOMAIN",
        ("dns_query_errors", "NXDOMAIN responses for inventory-db.internal since 11:40"),
        "span inventory-service -> inventory-db.internal: 2.1s before failing (retries)",
        "Root cause: the DNS record for inventory-db.internal is missing (NXDOMAIN), so inventory-service "
        "cannot resolve its database. Remediation: restore the DNS record.",
        "",
        v2_wrong="Root cause: network latency between inventory-service and its database: calls take 2.1s "
        "before failing. Remediation: investigate the network path and raise client timeouts.",
    ),
    Scenario(
        "disk",
        ("disk", "no space", "logs-ingest", "volume"),
        "logs-ingest",
        "ERROR logs-ingest: write failed: no space left on device (/var/lib/ingest 100%)",
        ("disk_used_percent", "/var/lib/ingest at 100% since 03:12"),
        "span logs-ingest flush(): ENOSPC",
        "Root cause: the logs-ingest volume /var/lib/ingest is full (no space left on device). "
        "Remediation: free space and enable log rotation.",
        "Root cause: the logs-ingest volume /var/lib/ingest is full (no space left on device), because "
        "rotation stopped at 03:12. Remediation: free space, re-enable log rotation, and alert at 80% use.",
    ),
    Scenario(
        "kafka",
        ("kafka", "consumer lag", "queue", "orders"),
        "orders-consumer",
        "WARN orders-consumer: consumer lag 182,000 messages on topic orders",
        ("consumer_group_rebalances", "orders-consumer group rebalanced 96 times in 1h (session timeout 10s)"),
        "span orders-consumer poll(): processing 14s > session timeout, member evicted",
        "Orders are delayed because of a spike in producer traffic on the orders topic.",
        "Root cause: the orders-consumer group is stuck in a rebalance loop: processing a batch takes 14s, "
        "longer than the 10s session timeout, so members are evicted and lag grows to 182,000. "
        "Remediation: raise the session timeout or shrink max.poll.records.",
        v1_tool_error=True,
        v2_repeats_search=True,
    ),
)

GENERIC = Scenario(
    "generic",
    (),
    "unknown-service",
    "INFO no errors matched the query",
    ("error_rate", "error rate nominal"),
    "no failing spans found",
    "I could not find a specific root cause in the logs.",
    "I could not find a specific root cause: logs, metrics and traces show no anomaly for this request.",
)


def pick_scenario(text: str) -> Scenario:
    low = text.lower()
    best, hits = GENERIC, 0
    for sc in SCENARIOS:
        n = sum(1 for k in sc.keywords if k in low)
        if n > hits:
            best, hits = sc, n
    return best


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


LATENCY_ENV = "AGENT_HEALTH_DEMO_LATENCY_MS"


class DemoConnector(Connector):
    """Deterministic offline agent; see the module docstring for how versions differ."""

    name = "demo"

    def __init__(self, agent: ResolvedAgent):
        super().__init__(agent)
        if "latency_ms" in agent.settings:
            raw, where = agent.settings["latency_ms"], f"agents.{agent.key}.settings.latency_ms"
        else:
            raw, where = os.environ.get(LATENCY_ENV) or 0, f"${LATENCY_ENV}"
        try:  # a bad value is one configuration error before any test runs, not a ValueError per test
            self.latency_s = check_number(raw, where, 0, LATENCY_MAX_MS) / 1000
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def endpoint(self) -> str:
        return "builtin:demo"

    def conversation_problem(self) -> str | None:
        return None  # it reads the conversation from each turn's history

    async def run(self, request: AgentRequest) -> RunResult:
        started = time.perf_counter()
        wall_start = time.time() * 1000
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        version = self.agent.version if self.agent.version in VERSIONS else "v2"
        context = " ".join(str(c.get("value", "")) for c in request.context)
        heard = request.prompt
        if request.turn and version != "v1":  # v2 reads the whole conversation; v1 only the latest message
            heard = " ".join([*(str(m.get("content", "")) for m in request.history if m.get("role") == "user"), heard])
        sc = pick_scenario(heard + " " + context)
        steps, output = self._converse(request, version, sc) if request.turn else ([], "")
        if not steps:
            steps, output = self._investigate(request, version, sc)
        model = self.agent.settings.get("model") or VERSIONS[version]
        llm_calls = 1 + sum(1 for s in steps if s.kind == "tool_call")
        said = " ".join(str(m.get("content", "")) for m in request.history)  # every call re-reads the conversation
        seen = seen_start = _tokens(said + request.prompt + context)
        input_tokens = output_tokens = 0
        for s in steps:  # every model call re-reads the conversation so far
            if s.kind in ("tool_call", "message"):
                input_tokens += seen + 180
                output_tokens += s.output_tokens or 0
            seen += _tokens(s.content) + _tokens(str(s.args or ""))
        duration = (time.perf_counter() - started) * 1000
        if self.agent.settings.get("spans_dir"):
            if request.turn:  # a conversation's turns are laid one after another on its simulated clock
                clock = request.session.setdefault("demo_clock_ms", [wall_start, 0.0])
                wall_start = clock[0] + clock[1]
                clock[1] += max(((s.started_ms or 0) + (s.duration_ms or 0) for s in steps), default=0.0)
            store = self._span_store()
            spans = demo_spans(request, steps, model, self.agent.ref, seen_start, wall_start)
            store.write_spans(spans)
            store.write_logs(demo_logs(request, steps, spans, sc.service))
        return self.run_result(
            request,
            output,
            steps,
            usage=Usage.of(input_tokens, output_tokens, model=model, llm_calls=llm_calls),
            raw_events=({"type": "demo", "scenario": sc.key, "version": version},),
            duration_ms=duration,
        )

    @staticmethod
    def _as_json(sc: Scenario, answer: str, version: str) -> str:
        """Structured answer; v1 leaves out the remediation, as a small model often does."""
        body: dict[str, Any] = {
            "service": sc.service,
            "root_cause": answer.split(". ")[0],
            "confidence": 0.55 if version == "v1" else 0.85,
        }
        if version != "v1":
            body["remediation"] = answer.split("Remediation: ")[-1] if "Remediation: " in answer else ""
        return json.dumps(body)

    def _span_store(self) -> Any:
        """The local span store this agent writes to (built once per connector)."""
        store = getattr(self, "_store", None)
        if store is None:
            store = self._store = traces_local.LocalSpanStore(self.agent.settings["spans_dir"])
        return store

    @staticmethod
    def _converse(request: AgentRequest, version: str, sc: Scenario) -> tuple[list[Step], str]:
        """v2's conversational moves (no steps: investigate as usual): ask about a vague report
        before acting, once; answer a follow-up on a diagnosis it gave already from the conversation."""
        if version == "v1":
            return [], ""
        answers = [str(m.get("content", "")) for m in request.history if m.get("role") == "assistant"]
        if sc is GENERIC and not any(a.rstrip().endswith("?") for a in answers):
            question = "Which service is affected, and what do you see: errors, slow requests or restarts?"
            return [
                Step(
                    kind="thinking",
                    content="The report names no service and no symptom; ask before searching anything.",
                    started_ms=0.0,
                    duration_ms=250.0,
                    output_tokens=30,
                ),
                Step(kind="message", content=question, started_ms=250.0, duration_ms=400.0, output_tokens=25),
            ], question
        given = sc.v2_wrong or sc.deep_answer  # what v2 answers about this scenario
        diagnosed = sc is not GENERIC and any(given[:60] in a for a in answers)
        if diagnosed and "Remediation: " in given:
            fix = given.split("Remediation: ")[-1]
            answer = f"As diagnosed above for {sc.service}, the fix: {fix}"
            return [
                Step(kind="message", content=answer, started_ms=0.0, duration_ms=600.0, output_tokens=_tokens(answer))
            ], answer
        return [], ""

    def _investigate(self, request: AgentRequest, version: str, sc: Scenario) -> tuple[list[Step], str]:
        steps: list[Step] = []
        clock = [0.0]

        def add(kind: StepKind, content: str = "", ms: float = 0.0, **kw: Any) -> None:
            # the demo's steps are valid by construction: skip validation on this hot path
            role: Role = "tool" if kind == "tool_result" else "assistant"  # model_construct skips the role default
            steps.append(
                Step.model_construct(kind=kind, role=role, content=content, started_ms=clock[0], duration_ms=ms, **kw)
            )
            clock[0] += ms

        def tool(name: str, args: dict[str, Any], result: str, ms: float, error: bool = False) -> None:
            cid = f"call_{len(steps)}"
            add("tool_call", "", 40.0, tool=name, args=args, call_id=cid, output_tokens=30)
            add("tool_result", result, ms, tool=name, call_id=cid, is_error=error)

        if version == "v1":
            add(
                "thinking",
                f"The user reports a problem. I will search the {sc.service} logs for errors.",
                300.0,
                output_tokens=40,
            )
            tool("search_logs", {"service": sc.service, "level": "error"}, sc.log_line, 450.0)
            if sc.v1_tool_error:
                tool(
                    "get_metrics",
                    {"service": sc.service, "metric": "lag"},
                    "error: unknown metric 'lag'; available: consumer_group_rebalances",
                    120.0,
                    error=True,
                )
            answer = sc.shallow_answer
        else:
            add(
                "thinking",
                f"Symptoms point at {sc.service}. Check logs first, then metrics, then traces to "
                "separate the symptom from the root cause.",
                900.0,
                output_tokens=120,
            )
            tool("search_logs", {"service": sc.service, "level": "error"}, sc.log_line, 450.0)
            if sc.v2_repeats_search:
                tool("search_logs", {"service": sc.service, "level": "error"}, sc.log_line, 450.0)
            tool("get_metrics", {"service": sc.service, "metric": sc.metric[0]}, sc.metric[1], 700.0)
            tool("query_traces", {"service": sc.service, "status": "error"}, sc.trace_finding, 1600.0)
            add(
                "thinking",
                "Correlating the log errors, the metric change and the failing spans.",
                1100.0,
                output_tokens=150,
            )
            answer = sc.v2_wrong or sc.deep_answer
        if "json" in request.prompt.lower():
            answer = self._as_json(sc, answer, version)
        add("message", answer, 800.0 if version == "v1" else 2400.0, output_tokens=_tokens(answer))
        return steps, answer


def demo_spans(
    request: AgentRequest, steps: list[Step], model: str, agent_ref: str, seen: int, wall_start_ms: float
) -> list[dict[str, Any]]:
    """The spans a real instrumented agent would emit for this run (times are the simulated step
    times laid from the run's wall-clock start). The agent span carries the usage sum of its
    model-call children, as many frameworks do, so readers must not count it twice."""
    service = "demo-agent"
    run_attrs = {"agent_health.run.id": request.run_id, "gen_ai.conversation.id": request.run_id}
    spans: list[dict[str, Any]] = []

    def span(
        name: str, start: float, end: float, parent: str, attrs: dict[str, Any], status: str = "OK"
    ) -> dict[str, Any]:
        s = {
            "trace_id": request.trace_id,
            "span_id": random_hex(64),
            "parent_span_id": parent,
            "name": name,
            "kind": "SPAN_KIND_INTERNAL",
            "service": service,
            "start_ms": wall_start_ms + start,
            "end_ms": wall_start_ms + end,
            "duration_ms": round(end - start, 3),
            "status": status,
            "attributes": {**run_attrs, **attrs},
        }
        spans.append(s)
        return s

    end = max(((s.started_ms or 0) + (s.duration_ms or 0) for s in steps), default=0.0)
    root = span(
        f"invoke_agent {agent_ref}",
        0.0,
        end,
        request.span_id,
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent_ref, "gen_ai.request.model": model},
    )
    call_start = 0.0
    total_in = total_out = 0
    for st in steps:
        st_end = (st.started_ms or 0) + (st.duration_ms or 0)
        if st.kind in ("tool_call", "message"):
            i, o = seen + 180, st.output_tokens or 0
            total_in, total_out = total_in + i, total_out + o
            span(
                f"chat {model}",
                call_start,
                st_end,
                root["span_id"],
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.system": "demo",
                    "gen_ai.request.model": model,
                    "gen_ai.response.model": model,
                    "gen_ai.usage.input_tokens": i,
                    "gen_ai.usage.output_tokens": o,
                },
            )
        elif st.kind == "tool_result":
            span(
                f"execute_tool {st.tool}",
                st.started_ms or 0,
                st_end,
                root["span_id"],
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": st.tool,
                    "gen_ai.tool.call.id": st.call_id,
                    **({"error.type": "tool_error"} if st.is_error else {}),
                },
                status="ERROR" if st.is_error else "OK",
            )
            call_start = st_end
        seen += _tokens(st.content) + _tokens(str(st.args or ""))
    root["attributes"].update({"gen_ai.usage.input_tokens": total_in, "gen_ai.usage.output_tokens": total_out})
    return spans


def demo_logs(
    request: AgentRequest, steps: list[Step], spans: list[dict[str, Any]], service: str
) -> list[dict[str, Any]]:
    """One log record per tool result, on the tool's span (what the agent's logger would write)."""
    tool_spans = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "execute_tool"]
    results = [st for st in steps if st.kind == "tool_result"]
    return [
        {
            "trace_id": request.trace_id,
            "span_id": sp["span_id"],
            "time_ms": sp["end_ms"],
            "severity": "ERROR" if st.is_error else "INFO",
            "body": f"{st.tool}: {st.content}",
            "service": "demo-agent",
            "attributes": {"agent_health.run.id": request.run_id, "target.service": service},
        }
        for sp, st in zip(tool_spans, results)
    ]
