"""A test's content hash tells the truth: it changes exactly when something that can change the
test's outcome changes (its options, body, fixtures used transitively, hooks in its scope, and the
module-level helpers, classes and constants they reference), and never for whitespace or comments."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_health.loader import load_tests

EVAL = """
from agent_health import before_each, describe, expect, fixture, test

LIMIT = 3  # shared constant
A_WORDS = ["alpha"]


def shared(x):
    return x * LIMIT


def only_a(x):
    return shared(x) + len(A_WORDS)


class Checker:
    factor = 2

    def check(self, v):
        return v * self.factor


@fixture
def base():
    return 1


@fixture
def fixture_a(base):
    return base + 10


def make_b():
    return 5


it = test.extend(fixture_b=make_b)


with describe("group a"):

    @before_each
    def hook_a():
        pass

    @test("a", prompt="p")
    def a(fixture_a):
        expect(only_a(fixture_a)).to_be_truthy()


@it("b", prompt="p")
def b(fixture_b):
    expect(shared(fixture_b)).to_be_truthy()


@test("c", prompt="p")
def c():
    expect(Checker().check(1)).to_equal(2)
"""


def hashes(root: Path, text: str) -> dict[str, str]:
    path = root / "evals" / "h.eval.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    loaded = load_tests([root / "evals"], root=root / "evals")
    assert not loaded.errors, loaded.errors
    return {t.case.name.split(" > ")[-1]: t.case.content_hash for t in loaded.tests}


def changed(root: Path, old: str, new: str) -> set[str]:
    before = hashes(root, EVAL)
    assert old in EVAL
    after = hashes(root, EVAL.replace(old, new))
    return {name for name in before if before[name] != after[name]}


def test_hashes_are_stable_across_loads(tmp_path):
    assert hashes(tmp_path, EVAL) == hashes(tmp_path, EVAL)


@pytest.mark.parametrize(
    ("old", "new", "stale"),
    [
        # something only test A uses marks only A
        ("return shared(x) + len(A_WORDS)", "return shared(x) - len(A_WORDS)", {"a"}),  # a helper
        ('A_WORDS = ["alpha"]', 'A_WORDS = ["alpha", "beta"]', {"a"}),  # a constant the helper reads
        ("return base + 10", "return base + 11", {"a"}),  # a file fixture
        ("def hook_a():\n        pass", "def hook_a():\n        print('setup')", {"a"}),  # a hook in its scope
        # a test.extend fixture: only B
        ("return 5", "return 6", {"b"}),
        # a class method only C uses
        ("factor = 2", "factor = 3", {"c"}),
        ("return v * self.factor", "return v + self.factor", {"c"}),
        # shared things mark everyone that uses them, transitively
        ("return x * LIMIT", "return x ** LIMIT", {"a", "b"}),
        ("LIMIT = 3", "LIMIT = 4", {"a", "b"}),
        ("return 1\n", "return 2\n", {"a"}),  # `base` is used by fixture_a only
        # options of one test
        ('@test("c", prompt="p")', '@test("c", prompt="q")', {"c"}),
        # comments and whitespace mark nothing
        ("# shared constant", "# the shared limit, changed comment", set()),
        ("def shared(x):\n    return x * LIMIT", "def shared(x):\n\n    # why\n    return x  *  LIMIT", set()),
        ('\n\n@test("c"', '\n\n\n\n# spacer\n@test("c"', set()),
    ],
)
def test_a_change_marks_exactly_the_tests_it_can_affect(tmp_path, old, new, stale):
    assert changed(tmp_path, old, new) == stale


def test_a_new_hook_in_a_scope_marks_the_tests_in_it(tmp_path):
    extra = EVAL.replace('    @test("a"', '    @before_each\n    def another():\n        pass\n\n    @test("a"')
    before, after = hashes(tmp_path, EVAL), hashes(tmp_path, extra)
    assert {n for n in before if before[n] != after[n]} == {"a"}


LOOP_EVAL = """
from agent_health import expect, test

LIMITS = {"one": 1, "two": 2, "again": 1}


def make(limit):
    async def body(agent):
        expect(limit).to_be_less_than(3)

    return body


for name, limit in LIMITS.items():
    test(name, prompt="p")(make(limit))
"""


def test_tests_sharing_one_code_object_hash_by_what_each_closes_over(tmp_path):
    # the fingerprint of a code object is computed once per load; what each function closes over
    # (here the limit) still counts per test
    first = hashes(tmp_path, LOOP_EVAL)
    second = hashes(tmp_path, LOOP_EVAL.replace('"two": 2', '"two": 1'))
    assert {name for name in first if first[name] != second[name]} == {"two"}
