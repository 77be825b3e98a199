"""The one run path every transport calls (`run_evaluation`, `run_tests`), the one builder of
its settings (`build_settings`), the wiring of agents, judges and analyzers from the
configuration, and re-judging stored results through the same path (`rejudge`)."""

from agent_health.session.rejudge import RejudgeOutcome, rejudge, rejudge_results
from agent_health.session.run import RunOutcome, run_evaluation, run_tests, select_tests
from agent_health.session.settings import ENV_VARS, build_settings, parse_store
from agent_health.session.wiring import build_analyzers, build_judges, build_runtime, replay_mode

__all__ = [
    "ENV_VARS",
    "RejudgeOutcome",
    "RunOutcome",
    "build_analyzers",
    "build_judges",
    "build_runtime",
    "build_settings",
    "parse_store",
    "rejudge",
    "rejudge_results",
    "replay_mode",
    "run_evaluation",
    "run_tests",
    "select_tests",
]
