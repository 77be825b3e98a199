"""A data case's content hash never moves unless its definition does: it is stored with every
result and decides which results are stale (docs/staleness.md), so a change to how the loader
builds or shares a case's values must leave it as it was. The hashes below were computed by
main at 9929162, before the loader shared the steps of cases naming the same tools as one object."""

from __future__ import annotations

import json

from agent_health import load_tests

CASES = [
    {"name": "tools only", "prompt": "checkout p99 latency is high", "expected_tools": ["get_metrics", "search_logs"]},
    {"name": "same tools", "prompt": "checkout p99 latency is high", "expected_tools": ["get_metrics", "search_logs"]},
    {"name": "nothing expected", "prompt": "kafka consumer lag on orders"},
    {
        "name": "trajectory and tools",
        "prompt": "logs-ingest disk full",
        "expected_trajectory": [{"description": "looks at the disk", "required_tools": ["df"]}],
        "expected_tools": ["search_logs"],
        "expected_outcomes": ["finds the full volume"],
    },
    {
        "name": "trajectory only",
        "prompt": "\u00dcn\u00efcode prompt \u2713",
        "expected_trajectory": [{"step": 3, "description": "a step", "required_tools": []}],
        "labels": ["a", "b"],
        "category": "rca",
        "timeout": 12.5,
        "epochs": 3,
    },
    {
        "id": "exported-1",
        "initialPrompt": "exported case",
        "expectedOutcomes": ["says hi"],
        "tags": ["x"],
        "context": [{"description": "ctx", "value": "v"}],
    },
]

PINNED = {
    "cases::tools-only": "2c9501b94d88684ce34cdafb7afa919e518ac8a24edcda3bc8614b7f48deed63",
    "cases::same-tools": "faf5adea2248dc89c8e0453c880acf3d07c9a1cde0092f1b9a9ab1c6894c35ff",
    "cases::nothing-expected": "cb2e7ec41235afdef93b41471eb00bf164dd6deb6dde5814d4f056c1c6c78119",
    "cases::trajectory-and-tools": "8dd58267e47b4a0af7daa94f231b2bcbbe92bdfca246faf38f06e11b18bc87da",
    "cases::trajectory-only": "a8c969e10cc33f81d918fb1061a8a0e97595edbb56cc45d7db811af92b9aaefb",
    "cases::exported-1": "440cdb80da013c485ace5739079460f556f1e059b9b9219e9c43fcf804512406",
}


def _load(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(CASES, ensure_ascii=False), encoding="utf-8")
    loaded = load_tests([path])
    assert not loaded.errors
    return loaded.tests


def test_the_content_hashes_of_data_cases_are_the_ones_pinned(tmp_path):
    assert {t.case.id: t.case.content_hash for t in _load(tmp_path)} == PINNED


def test_cases_naming_the_same_tools_share_their_steps(tmp_path):
    tests = {t.case.id: t.case for t in _load(tmp_path)}
    first, second = tests["cases::tools-only"], tests["cases::same-tools"]
    assert first.expected_trajectory is second.expected_trajectory
    (step,) = first.expected_trajectory
    assert step.step == 1 and step.required_tools == ("get_metrics", "search_logs")
    both = tests["cases::trajectory-and-tools"].expected_trajectory
    assert [(s.step, s.required_tools) for s in both] == [(1, ("df",)), (2, ("search_logs",))]
    assert tests["cases::nothing-expected"].expected_trajectory == ()
