"""The one run path every transport calls (`run_evaluation`, `run_tests`), the one way its loop is
run (`run_loop`), the one builder of its settings (`build_settings`), the wiring of agents, judges
and analyzers from the configuration, and re-judging stored results through the same path
(`agent_health.session.rejudge`)."""

from typing import TYPE_CHECKING

from agent_health.lazy import lazy_names
from agent_health.session.process import run_loop
from agent_health.session.run import RunOutcome, plan_run, run_evaluation, run_tests, select_tests
from agent_health.session.settings import ENV_VARS, build_settings, parse_store
from agent_health.session.wiring import build_analyzers, build_judges, build_runtime, replay_mode

if TYPE_CHECKING:
    from agent_health.session.rejudge import RejudgeOutcome, rejudge_results

# re-judging loads the stored-result readers a run does not need: on first use. Its entry point
# `rejudge` is not re-exported here, where it would be the name of the submodule
# `agent_health.session.rejudge` once that is imported: it is `agent_health.rejudge`.
_LAZY = dict.fromkeys(["RejudgeOutcome", "rejudge_results"], "agent_health.session.rejudge")


__getattr__ = lazy_names(__name__, _LAZY)


__all__ = [
    "ENV_VARS",
    "RejudgeOutcome",
    "RunOutcome",
    "build_analyzers",
    "build_judges",
    "build_runtime",
    "build_settings",
    "parse_store",
    "plan_run",
    "rejudge_results",
    "replay_mode",
    "run_evaluation",
    "run_loop",
    "run_tests",
    "select_tests",
]
