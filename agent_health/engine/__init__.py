"""The engine: one test against one agent version (`AgentEngine`), many of them under one
concurrency limit (`run_plan`), and the loop watchdog. `agent_health.session` wires it up."""

from agent_health.engine.budget import BUDGET_REACHED, Budget
from agent_health.engine.runner import AgentEngine, EngineOptions, Scopes
from agent_health.engine.scheduler import PlanOutcome, Running, run_plan
from agent_health.engine.scoring import combine_trials, evaluation_type, score_of, status_of
from agent_health.engine.watchdog import LoopBlocked, Watchdog

__all__ = [
    "BUDGET_REACHED",
    "AgentEngine",
    "Budget",
    "EngineOptions",
    "LoopBlocked",
    "PlanOutcome",
    "Running",
    "Scopes",
    "Watchdog",
    "combine_trials",
    "evaluation_type",
    "run_plan",
    "score_of",
    "status_of",
]
