"""YAML alias bombs, recursive aliases and deep nesting are rejected at once, naming the file; a
file that uses aliases the ordinary way still loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_health import load_tests

BOMB = Path(__file__).with_name("data") / "billion-laughs.yaml"


def test_billion_laughs_is_rejected_naming_the_file():
    assert 1000 < BOMB.stat().st_size < 2000  # 10^9 strings in about 1.3 KB
    loaded = load_tests([BOMB])
    assert loaded.tests == []
    [error] = [str(e) for e in loaded.errors]
    assert error.startswith("billion-laughs.yaml:") and "aliases expand to more than 100,000 nodes" in error


def bomb(levels: int, width: int, where: str) -> str:
    lines = ["x:", "  l1: &l1"] + ["    - lol"] * width
    for n in range(2, levels + 1):
        lines += [f"  l{n}: &l{n}"] + [f"    - *l{n - 1}"] * width
    return "\n".join(lines) + "\ntests:\n  - name: t\n    prompt: p\n" + where.replace("LAST", f"*l{levels}") + "\n"


@pytest.mark.parametrize(
    "where",
    [
        "    labels: LAST",
        "    context: LAST",
        "    expected_outcomes: LAST",
        "    description: LAST",
        "    extra: LAST",
    ],
)
@pytest.mark.parametrize(("levels", "width"), [(9, 10), (5, 100), (3, 1000)])
def test_alias_bombs_of_any_shape_are_rejected(tmp_path, evals, levels, width, where):
    evals("bomb.yaml", bomb(levels, width, where))
    evals("fine.yaml", "tests:\n  - name: fine\n    prompt: p\n")
    loaded = load_tests([tmp_path / "evals"])
    assert [t.case.id for t in loaded.tests] == ["fine::fine"]
    [error] = [str(e) for e in loaded.errors]
    assert error.startswith("bomb.yaml:") and "alias bomb" in error


def test_one_large_anchor_used_many_times_is_rejected(tmp_path, evals):
    big = "\n".join(f"    - item {i}" for i in range(40_000))
    evals("wide.yaml", f"x: &big\n{big}\ntests:\n  - name: t\n    prompt: p\n    labels: [*big, *big, *big]\n")
    [error] = [str(e) for e in load_tests([tmp_path / "evals"]).errors]
    assert "aliases expand to more than 100,000 nodes" in error


def test_recursive_alias_is_rejected(tmp_path, evals):
    evals("loop.yaml", "tests:\n  - &case\n    name: loop\n    prompt: p\n    context: [*case]\n")
    [error] = [str(e) for e in load_tests([tmp_path / "evals"]).errors]
    assert error.startswith("loop.yaml:5: invalid YAML: recursive alias *case")


def test_deep_nesting_is_rejected(tmp_path, evals):
    evals("deep.yaml", "tests:\n  - name: deep\n    prompt: p\n    labels: " + "[" * 5000 + "]" * 5000 + "\n")
    [error] = [str(e) for e in load_tests([tmp_path / "evals"]).errors]
    assert error.startswith("deep.yaml:4: invalid YAML: nested more than 100 levels deep")


def test_ordinary_aliases_and_merge_keys_still_load(tmp_path, evals):
    cases = "\n".join(f"  - <<: *base\n    name: case {i}\n    prompt: prompt {i}" for i in range(2000))
    evals(
        "merged.yaml",
        f"base: &base\n  labels: [smoke, nightly]\n  timeout: 30\n  expected_tools: [search_logs]\ntests:\n{cases}\n",
    )
    loaded = load_tests([tmp_path / "evals"])
    assert not loaded.errors and len(loaded.tests) == 2000
    case = loaded.tests[-1].case
    assert case.labels == ("smoke", "nightly") and case.timeout_s == 30
    assert case.expected_trajectory[-1].required_tools == ("search_logs",)
