"""Building what a run needs from the configuration: each agent version's runtime (connector,
record/replay, traces), the judge service and the analyzers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_health.analysis.calibration import latest_calibrations
from agent_health.analysis.insights import insights_analyzer
from agent_health.analysis.metrics import with_trace_metrics
from agent_health.config import Config
from agent_health.config.fingerprints import agent_settings_hash, judge_settings_hash
from agent_health.config.model import JudgeSettings
from agent_health.connectors.base import AgentRuntime, connector_class
from agent_health.errors import ConfigError
from agent_health.judges.rubric import load_rubric
from agent_health.judges.service import JudgeService
from agent_health.model.agent import ResolvedAgent
from agent_health.model.calibration import CalibrationGate, judge_key
from agent_health.model.settings import JudgeRunSettings, check_replay_mode
from agent_health.pricing import price_source
from agent_health.replay.store import ReplayConnector, open_recordings
from agent_health.replay.stored import StoredRunConnector, stored_runs_for
from agent_health.session.settings import build_settings
from agent_health.stores import open_store
from agent_health.traces import otel_capture, trace_view_factory, traces_enabled


def replay_mode(config: Config, replay: str | None = None) -> str:
    """The record/replay mode: the explicit one (--replay), else as `build_settings` resolves it
    ($AGENT_HEALTH_REPLAY, else the configuration's): one rule, in one place."""
    if replay:
        return check_replay_mode(replay, "--replay")
    return build_settings(config).replay


def build_runtime(config: Config, agent: str | ResolvedAgent, replay: str | None = None) -> AgentRuntime:
    """Build the connector of an agent version (KEY@VERSION, resolved here, or as the run resolved
    it; raises ConfigError naming the agent, or the setting whose environment variable is missing),
    wrapped for record/replay unless the mode is
    `off`. Recordings live in `<state>/recordings`. Runs of agents with traces get a lazy
    `result.traces` view. While re-judging (`agent_health.replay.stored.replaying`), the version
    replays its stored results' runs instead, and its connector is never built."""
    if isinstance(agent, str):
        agent = config.agent(agent)
    settings_hash = agent_settings_hash(config, agent)  # as configured: before the paths added below
    if agent.connector != "demo" and "root" not in agent.settings:  # relative cwd/modules resolve here
        agent = agent.model_copy(update={"settings": {**agent.settings, "root": config.root}})
    if agent.connector == "demo" and traces_enabled(config, agent) and "spans_dir" not in agent.settings:
        # The demo agent writes its spans where the local trace source reads them.
        spans = config.path(config.traces.settings.get("path") or str(config.state_path / "spans"))
        agent = agent.model_copy(update={"settings": {**agent.settings, "spans_dir": str(spans)}})

    stored = stored_runs_for(agent.ref)
    if stored is not None:  # re-judging: the stored results' runs, and the agent is never called
        return AgentRuntime(agent, StoredRunConnector(agent, stored), trace_view_factory(config), settings_hash)
    connector = connector_class(agent.connector)(agent)
    mode = replay_mode(config, replay)
    if mode != "off":
        recordings = open_recordings(config.store, config.state_path / "recordings")  # shared with the store
        connector = ReplayConnector(connector, recordings, mode)
    return AgentRuntime(
        agent,
        connector,
        trace_views=trace_view_factory(config),
        settings_hash=settings_hash,
        capture=otel_capture(config, agent),
    )


def build_analyzers(config: Config, judges: JudgeService | None = None) -> list[Any]:
    """What runs on each TestResult: the trace metrics (the run's own are in its `metrics`
    already), then offline insights plus the configured synthesizer, if any."""
    llm = None
    if config.insights == "llm" and judges is not None:
        llm = judges.llm()  # the judge model's cached helper: synthesizer calls go through the judge cache
        if getattr(llm, "client", None) is None:
            llm = None  # the offline demo judge has no model: resolve_synthesizer says so, naming the setting
    return [
        with_trace_metrics(config.prices, config.traces.metrics_wait_s),
        insights_analyzer(config.insights, llm=llm),
    ]


def run_judge_settings(config: Config, run: JudgeRunSettings | None) -> JudgeSettings:
    """The judge settings of a run: the configuration's, with the run's judge model (`--judge-model`,
    $AGENT_HEALTH_JUDGE_MODEL, run config) when it names one."""
    if run is None or not run.model:
        return config.judge
    return config.judge.model_copy(update={"model": run.model})


def build_judges(
    config: Config, run: JudgeRunSettings | None = None, *, skip: bool = False, no_cache: bool = False
) -> JudgeService:
    """The judge service for a run, from the `judge` settings and `evaluators`, and the run's
    typed judge settings `run` (RunSettings.judge: skip, judge model, cache), when given.

    `no_cache=True` (RunSettings.judge.cache False: `--no-cache`, AGENT_HEALTH_NO_CACHE=1)
    bypasses the persistent judge cache: every judgement calls the provider and nothing is stored."""
    if run is not None:
        skip, no_cache = skip or run.skip, no_cache or not run.cache
    judge = run_judge_settings(config, run)

    evaluators = dict(config.evaluators)
    for name, path in config.judge.rubrics.items():
        if name in evaluators:
            raise ConfigError(f"evaluator {name!r} is defined twice: in evaluators and in judge.rubrics")
        evaluators[name] = load_rubric(config.path(path))
    judges = JudgeService.from_settings(
        judge,
        state_path=config.state_path,
        skip=skip,
        no_cache=no_cache,
        evaluators=evaluators,
        store=config.store,  # a shared store shares the judge cache too
    )
    judges.settings_hash = judge_settings_hash(config, judge)
    return judges


def check_budget_prices(config: Config, judges: JudgeService, agents: Iterable[str | ResolvedAgent] = ()) -> None:
    """With a budget in USD every model the run will call needs a price (`prices`, the demo prices
    or the bundled price database): a ConfigError naming the first one without, and how to add it,
    instead of counting its spend as zero. Checks the judge models the configuration names (the
    run's, `per_test`, `judge.providers`) and the `model` setting of each of `agents` (KEY@VERSION,
    or as the run resolved them), when it has one."""
    wanted: list[tuple[str, str]] = []  # (model id, where it is named)
    if judges.settings is not None and not judges.skip:
        s = judges.settings
        specs = [(s.model, "judge.model"), *((spec, f"judge.per_test[{p!r}]") for p, spec in s.per_test.items())]
        specs += [(f"{name}:", f"judge.providers[{name!r}]") for name in s.providers]
        for spec, where in specs:
            try:
                kind, model = judges.provider_model(spec)
            except ConfigError:
                continue  # a provider without a model: the run names it when the judge is used
            if kind != "demo" and model:
                wanted.append((model, where))
    for agent in agents:
        resolved = config.agent(agent) if isinstance(agent, str) else agent
        model = resolved.settings.get("model")
        if isinstance(model, str) and model:
            wanted.append((model, f"agent {resolved.ref} settings.model"))
    for model, where in wanted:
        if price_source(model, config.prices) is None:
            raise ConfigError(
                f"budget: model {model!r} ({where}) has no price, so its spend cannot be counted; add it to "
                f"the configuration: define_config(prices={{{model!r}: (USD per 1M input tokens, "
                "USD per 1M output tokens)}) (docs/budgets.md)"
            )


def gate_judges(judges: JudgeService, config: Config, store: Any, *, require: bool = False) -> None:
    """Arm the calibration gate (`judge.calibration`, or the default gate when `require`): each
    gating verdict of a judge whose newest calibration in `store` (the run's, else the configured
    one) misses it is demoted to observe, or errored when `require` (--require-calibrated). A
    store that cannot be read is a StoreError before anything runs."""
    gate = config.judge.calibration
    if gate is None and not require:
        return
    gate = gate or CalibrationGate()
    if store is None:
        store = open_store(config)
    latest = latest_calibrations(store.calibrations())
    judges.calibration = lambda identity: gate.check(latest.get(judge_key(identity)))
    judges.require_calibrated = require
