"""Trace sources (local span store, OpenSearch), lazy run-bound views, and run-scoped query tools.

`make_binder(config)` is what the session hands to `AgentRuntime(bind_traces=...)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from agent_health.traces.view import TracesNotEnabled, TracesUnavailable, TracesView, view_of

if TYPE_CHECKING:  # pragma: no cover
    from agent_health.config import Config
    from agent_health.connectors.base import ResolvedAgent
    from agent_health.model import RunResult
    from agent_health.traces.source import TraceSource

__all__ = ["TracesNotEnabled", "TracesUnavailable", "TracesView", "build_source", "make_binder",
           "traces_enabled", "view_of"]


def build_source(config: "Config") -> "TraceSource | None":
    """The configured trace source, or None when `traces.source` is 'none'."""
    from agent_health.sdk.errors import ConfigError

    settings = dict(config.traces.settings)
    kind = config.traces.source
    if kind == "none":
        return None
    if kind == "local":
        from agent_health.traces.local import LocalTraceSource

        root = settings.pop("path", None) or str(config.state_path / "spans")
        return LocalTraceSource(config.path(root), **{k: v for k, v in settings.items()
                                                       if k in ("exclude_services", "run_id_attributes",
                                                                "window_slack_s")})
    if kind == "opensearch":
        from agent_health.traces.opensearch import OpenSearchTraceSource

        return OpenSearchTraceSource(settings)
    raise ConfigError(f"traces.source: unknown {kind!r}; use local, opensearch or none")


def traces_enabled(config: "Config", agent: "ResolvedAgent") -> bool:
    """An agent has traces when it says so, or it is the demo agent and spans are kept locally."""
    if config.traces.source == "none":
        return False
    return agent.traces or (agent.connector == "demo" and config.traces.source == "local")


def make_binder(config: "Config", source: "TraceSource | None" = None
                ) -> Callable[["RunResult", "ResolvedAgent"], "RunResult"] | None:
    """A `TraceBinder` attaching a lazy `TracesView` to each run of agents with traces."""
    if config.traces.source == "none":
        return None
    state: dict[str, Any] = {"source": source}

    def bind(result: "RunResult", agent: "ResolvedAgent") -> "RunResult":
        if not traces_enabled(config, agent):
            return result
        if state["source"] is None:  # built on first use: the CLI pays for opensearch-py only then
            state["source"] = build_source(config)
        from agent_health.traces.source import RunRef

        service = agent.settings.get("service_name") or config.traces.settings.get("service_name")
        # A replayed run keeps the recorded ids: its spans are there from the original run or never.
        wait_s = 0.0 if result.replayed else config.traces.wait_s
        view = TracesView(state["source"], RunRef.of(result, service), wait_s=wait_s, prices=dict(config.prices))
        return result.bind_traces(view)

    return bind
