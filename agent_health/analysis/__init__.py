"""Derived figures over results: metrics, insights, suite rollups and the leaderboard, comparisons of
two versions with their statistics, judge calibration against human labels, and data frames.

Names load on first use (a run that never compares never imports numpy). `compare` and `rollup`
are submodules here (a function of the same name would be shadowed by its module once loaded):
`compare_results` and `agent_health.analysis.rollup.rollup` are the functions."""

from typing import TYPE_CHECKING

from agent_health.lazy import lazy_names

if TYPE_CHECKING:
    from agent_health.analysis.compare import Comparison, TestDelta, compare_results
    from agent_health.analysis.frames import results_frame
    from agent_health.analysis.rollup import Leaderboard, SuiteRollup, leaderboard, load_summaries

_LAZY = {
    **dict.fromkeys(["Comparison", "TestDelta", "compare_results"], "agent_health.analysis.compare"),
    "results_frame": "agent_health.analysis.frames",
    **dict.fromkeys(["Leaderboard", "SuiteRollup", "leaderboard", "load_summaries"], "agent_health.analysis.rollup"),
}

__getattr__ = lazy_names(__name__, _LAZY)

__all__ = [
    "Comparison",
    "Leaderboard",
    "SuiteRollup",
    "TestDelta",
    "compare_results",
    "leaderboard",
    "load_summaries",
    "results_frame",
]
