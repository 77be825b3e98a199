"""Trace sources (local span store, OpenTelemetry captured for the runs, OpenSearch), lazy
run-bound views, and run-scoped query tools.

`trace_view_factory(config)` is what the session hands to `AgentRuntime(trace_views=...)`: the
runtime makes one lazy view per run, which the running test hands to the body (`result.traces`),
the judges and the analyzers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_health.errors import ConfigError, TracesNotEnabled, TracesUnavailable
from agent_health.lazy import deferred
from agent_health.traces.view import TracesView

# a trace source's module loads when the source is built: opensearch-py only for that source
if TYPE_CHECKING:  # pragma: no cover
    import agent_health.traces.capture as traces_capture
    import agent_health.traces.local as traces_local
    import agent_health.traces.opensearch as traces_opensearch
    import agent_health.traces.source as traces_source
    from agent_health.config import Config
    from agent_health.model import RunResult
    from agent_health.model.agent import ResolvedAgent
    from agent_health.traces.source import TraceSource
else:
    traces_capture = deferred("agent_health.traces.capture")
    traces_local = deferred("agent_health.traces.local")
    traces_opensearch = deferred("agent_health.traces.opensearch")
    traces_source = deferred("agent_health.traces.source")


__all__ = [
    "TracesNotEnabled",
    "TracesUnavailable",
    "TracesView",
    "build_source",
    "otel_capture",
    "spans_path",
    "trace_view_factory",
    "traces_enabled",
]


def build_source(config: Config) -> TraceSource | None:
    """The configured trace source, or None when `traces.source` is 'none'."""
    settings = dict(config.traces.settings)
    kind = config.traces.source
    if kind == "none":
        return None
    if kind in ("local", "otel"):  # otel: spans captured for the runs, kept in the same folder
        return traces_local.LocalTraceSource(
            spans_path(config),
            **{k: v for k, v in settings.items() if k in ("exclude_services", "run_id_attributes", "window_slack_s")},
        )
    if kind == "opensearch":
        return traces_opensearch.OpenSearchTraceSource(settings)
    raise ConfigError(f"traces.source: unknown {kind!r}; use local, otel, opensearch or none")


def spans_path(config: Config) -> Path:
    """The local span folder: `traces.settings.path`, else `<state>/spans`."""
    return config.path(config.traces.settings.get("path") or str(config.state_path / "spans"))


def otel_capture(config: Config, agent: ResolvedAgent) -> Any:
    """The OpenTelemetry capture of an agent version's runs (an `OTelCapture`) when the source is
    `otel` and the agent has traces, else None. `traces.settings.receiver: false` turns the OTLP
    receiver off, `in_process: false` the span processor."""
    if config.traces.source != "otel" or not traces_enabled(config, agent) or agent.connector == "demo":
        return None
    settings = config.traces.settings
    try:
        capture = traces_capture.OTelCapture
    except ImportError as exc:
        raise ConfigError(
            f"traces.source 'otel' needs {getattr(exc, 'name', None) or exc}, which is not installed: "
            "pip install 'agent-health[otel]'"
        ) from None
    return capture(
        traces_local.LocalSpanStore(spans_path(config)),
        receiver=bool(settings.get("receiver", True)),
        in_process=bool(settings.get("in_process", True)),
    )


def traces_enabled(config: Config, agent: ResolvedAgent) -> bool:
    """An agent has traces when it says so, or it is the demo agent and spans are kept locally."""
    if config.traces.source == "none":
        return False
    return agent.traces or (agent.connector == "demo" and config.traces.source in ("local", "otel"))


def trace_view_factory(
    config: Config, source: TraceSource | None = None
) -> Callable[[RunResult, ResolvedAgent], TracesView | None] | None:
    """Makes the lazy `TracesView` of each run of an agent with traces (None for other agents)."""
    if config.traces.source == "none":
        return None
    state: dict[str, Any] = {"source": source}

    def view(result: RunResult, agent: ResolvedAgent) -> TracesView | None:
        if not traces_enabled(config, agent):
            return None
        if state["source"] is None:  # built on first use: the CLI pays for opensearch-py only then
            state["source"] = build_source(config)

        service = agent.settings.get("service_name") or config.traces.settings.get("service_name")
        # A replayed run keeps the recorded ids: its spans are there from the original run or never.
        wait_s = 0.0 if result.replayed else config.traces.wait_s
        return TracesView(
            state["source"], traces_source.RunRef.of(result, service), wait_s=wait_s, prices=dict(config.prices)
        )

    return view
