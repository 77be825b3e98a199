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


@pytest.mark.parametrize(
    ("content", "line", "key"),
    [
        (  # the case: the second list of tools would replace the first
            "tests:\n  - name: t\n    prompt: p\n    expected_tools: [search_logs]\n"
            "    expected_tools: [query_metrics]\n",
            5,
            "expected_tools",
        ),
        ("defaults:\n  timeout: 5\n  timeout: 50\ntests:\n  - name: t\n    prompt: p\n", 3, "timeout"),
        ("tests:\n  - name: t\n    prompt: p\ntests:\n  - name: u\n    prompt: p\n", 4, "tests"),
        ("tests:\n  - {name: t, prompt: p, context: [{description: a, value: x, value: y}]}\n", 2, "value"),
        ("- name: t\n  prompt: p\n  labels: [a]\n  name: u\n", 4, "name"),
        ("tests:\n  - name: t\n    prompt: p\n    epochs: 1\n    'epochs': 2\n", 5, "epochs"),
    ],
    ids=["expected_tools twice", "in defaults", "tests twice", "in a context item", "root list", "quoted"],
)
def test_duplicate_yaml_keys_are_an_error_naming_file_line_and_key(tmp_path, evals, content, line, key):
    """YAML keeps the last of two equal keys without a word, as JSON does; both are load errors."""
    evals("dup.yaml", content)
    evals("fine.yaml", "tests:\n  - name: fine\n    prompt: p\n")
    loaded = load_tests([tmp_path / "evals"])
    assert [t.case.id for t in loaded.tests] == ["fine::fine"]
    [error] = [str(e) for e in loaded.errors]
    assert error == f"dup.yaml:{line}: duplicate key {key!r} in one mapping (YAML would keep only its last value)"


def test_a_merge_key_may_still_be_overridden(tmp_path, evals):
    evals(
        "merged.yaml",
        "base: &base\n  labels: [smoke]\n  timeout: 30\ntests:\n  - <<: *base\n    name: t\n    prompt: p\n"
        "    timeout: 5\n",
    )
    loaded = load_tests([tmp_path / "evals"])
    assert not loaded.errors
    [t] = loaded.tests
    assert (t.case.labels, t.case.timeout_s) == (("smoke",), 5)
