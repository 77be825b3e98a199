"""Importing `*.eval.py` files into a fresh per-file registry."""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_health.errors import EvalFileError
from agent_health.interrupts import describe, must_propagate
from agent_health.loader.fingerprint import Fingerprinter
from agent_health.loader.ids import content_hash, suite_name, test_id
from agent_health.loader.registry import (
    BUILTIN_FIXTURES,
    HOOK_KINDS,
    FileRegistry,
    FixtureDef,
    TestSpec,
    activate,
    deactivate,
    parameters,
)
from agent_health.loader.types import LoadedTest
from agent_health.model import TestCase

_counter = itertools.count()


def _error_line(exc: BaseException, path: Path) -> int | None:
    if isinstance(exc, SyntaxError):
        return exc.lineno
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == path:
            line = frame.lineno
    return line


def import_eval_file(path: Path, rel: str) -> FileRegistry:
    """Execute one eval file with its own registry; raise EvalFileError naming file and line."""
    registry = FileRegistry(rel)
    tag = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"agent_health_evals.f{tag}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise EvalFileError(rel, "cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.parent)
    sys.path.insert(0, folder)  # helpers next to an eval file import as they would under pytest
    token = activate(registry)
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # sys.exit() at import is this file's load error, not the run's end
        if must_propagate(exc):
            raise
        raise EvalFileError(rel, f"failed to import: {describe(exc, located=False)}", _error_line(exc, path)) from exc
    finally:
        # The module is needed while it executes (dataclasses, pydantic and pickling look it up);
        # afterwards its functions keep their globals, and a long-lived process (the Dagster
        # sensor reloads files) must not collect one module per load.
        sys.modules.pop(name, None)
        deactivate(token)
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    return registry


def _fixture(name: str, spec: TestSpec, registry: FileRegistry) -> FixtureDef | None:
    """The fixture a parameter names, as the engine resolves it (test.extend ones first)."""
    return spec.fixtures.get(name) or registry.fixtures.get(name)


def test_callables(spec: TestSpec, registry: FileRegistry) -> list[Callable[..., Any]]:
    """Everything that runs for this test, in a stable order: the body, the hooks of its scopes
    (outermost first), and every fixture those ask for, transitively."""
    hooks = [h for scope in spec.scope.chain() for kind in HOOK_KINDS for h in scope.hooks[kind]]
    out: list[Callable[..., Any]] = [spec.body, *hooks]
    seen: set[str] = set()
    todo = list(out)
    while todo:
        fn = todo.pop(0)
        for name in parameters(fn):
            if name in seen:
                continue
            seen.add(name)
            fixture = _fixture(name, spec, registry)
            if fixture is not None:
                out.append(fixture.fn)
                todo.append(fixture.fn)
    return out


def code_case(
    spec: TestSpec, suite: str, rel: str, registry: FileRegistry, fingerprints: Fingerprinter | None = None
) -> TestCase:
    """The test's case; its content hash covers its options and the normalised code of everything
    that runs for it (see agent_health/loader/fingerprint.py and docs/staleness.md)."""
    fingerprints = fingerprints or Fingerprinter(_code_file(spec))
    options = {
        "name": spec.name,
        "prompt": spec.prompt,
        "labels": spec.labels,
        "description": spec.description,
        "context": [c.model_dump() for c in spec.context],
        "timeout": spec.timeout_s,
        "expected_outcomes": spec.expected_outcomes,
        "expected_trajectory": [s.model_dump() for s in spec.expected_trajectory],
        "skip_judge": spec.skip_judge,
        "epochs": spec.epochs,
        "code": fingerprints.of(test_callables(spec, registry)),
    }
    if spec.max_cost_usd is not None:  # hashed only when set: tests without a cap keep their hash
        options["max_cost_usd"] = spec.max_cost_usd
    if suite_judges := spec.suite_judge_list():  # likewise: a test without suite judges keeps its hash
        options["suite_judges"] = [getattr(j, "label", j) for j in suite_judges]
    return TestCase(
        id=test_id(suite, spec.name),
        name=spec.name,
        suite=suite,
        source_file=rel,
        line=spec.line,
        kind="code",
        description=spec.description,
        labels=spec.labels,
        prompt=spec.prompt,
        context=spec.context,
        expected_outcomes=spec.expected_outcomes,
        expected_trajectory=spec.expected_trajectory,
        timeout_s=spec.timeout_s,
        skip_judge=spec.skip_judge,
        epochs=spec.epochs,
        max_cost_usd=spec.max_cost_usd,
        content_hash=content_hash(options),
    )


def _code_file(spec: TestSpec) -> str:
    code = getattr(spec.body, "__code__", None)
    return code.co_filename if code else ""


def missing_fixtures(spec: TestSpec, registry: FileRegistry) -> list[str]:
    """Parameters of the body (and of the fixtures it uses) that name no fixture."""
    known = set(BUILTIN_FIXTURES) | set(registry.fixtures) | set(spec.fixtures)
    missing, seen, todo = [], set(), [spec.body]
    while todo:
        fn = todo.pop()
        for p in parameters(fn):
            if p in seen:
                continue
            seen.add(p)
            if p not in known:
                missing.append(p)
            elif p in spec.fixtures or p in registry.fixtures:
                todo.append((spec.fixtures.get(p) or registry.fixtures[p]).fn)
    return missing


def load_code_file(path: Path, rel: str) -> tuple[list[LoadedTest], list[EvalFileError]]:
    registry = import_eval_file(path, rel)
    # What memory a suite of 50,000 tests needs at its peak is what loading holds at its end: keep
    # no more than the loaded tests need. The names were only for finding duplicates at import.
    registry.lines.clear()
    suite = suite_name(rel)
    tests: list[LoadedTest] = []
    # each error of a test with its place among the file's tests: 2k just before the k-th loaded
    # test (from 0), 2k + 1 that test itself
    failed: list[tuple[int, EvalFileError]] = []
    fingerprints = Fingerprinter(str(path))
    specs, registry.tests = registry.tests, []
    specs.reverse()
    while specs:  # each spec is let go once its test is loaded: the test keeps what it runs
        spec = specs.pop()
        missing = missing_fixtures(spec, registry)
        if missing:
            known = sorted(set(BUILTIN_FIXTURES) | set(registry.fixtures) | set(spec.fixtures))
            message = f"test {spec.name!r} asks for unknown fixture(s) {', '.join(map(repr, missing))}; known: "
            failed.append((2 * len(tests), EvalFileError(rel, message + ", ".join(known), spec.line)))
            continue
        case = code_case(spec, suite, rel, registry, fingerprints)
        fingerprints.forget(spec.body)  # a body is one test's (a helper many share stays cached)
        tests.append(LoadedTest.of(case, spec, registry, registry.shared))
    registry.shared.clear()  # the tests keep the values; the lookup of them is not needed again
    tests = _first_of_each_id(tests, failed, rel)
    failed.sort(key=lambda pair: pair[0])
    return tests, [*registry.errors, *(error for _, error in failed)]


def _first_of_each_id(tests: list[LoadedTest], failed: list[tuple[int, EvalFileError]], rel: str) -> list[LoadedTest]:
    """`tests` without those whose id a test defined before them has (two names with one slug),
    each of those an error in `failed`. Found by sorting rather than with a dict of every id: at
    the end of loading 50,000 tests such a dict would be the largest thing held but the tests."""
    by_id = sorted(tests, key=lambda t: t.case.id)  # stable: each run of one id starts with its first
    dropped: set[int] = set()
    for _, group in itertools.groupby(by_id, key=lambda t: t.case.id):
        first, *later = group
        for t in later:
            dropped.add(id(t))
            c = t.case
            message = f"test {c.name!r} has the same id {c.id!r} as test {first.case.name!r}; rename one"
            failed.append((2 * tests.index(t) + 1, EvalFileError(rel, message, c.line)))
    return [t for t in tests if id(t) not in dropped] if dropped else tests
