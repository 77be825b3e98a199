"""The engine: one code path for every transport."""

from agent_health.engine.runner import Engine, EngineOptions
from agent_health.engine.scoring import combine_trials, evaluation_type, score_of, status_of

__all__ = ["Engine", "EngineOptions", "combine_trials", "evaluation_type", "score_of", "status_of"]
