"""Data test cases: JSON, YAML and JSONL, in agent-health's exported format or the native one.

agent-health format (one object, a list, or `{"testCases": [...]}`)::

    {"id": "tc-1", "name": "...", "description": "...", "category": "RCA", "difficulty": "Hard",
     "labels": [...] | "tags": [...], "initialPrompt": "...",
     "context": [{"description": "...", "value": "..."}],
     "expectedOutcomes": ["..."],
     "expectedTrajectory": [{"step": 1, "description": "...", "requiredTools": ["search_logs"]}]}

Native format (YAML or JSON)::

    defaults: {labels: [...], timeout: 60}
    tests:
      - name: payment outage
        prompt: Diagnose why the payment service is failing.
        context: [{description: Error log, value: "..."}]
        expected_tools: [search_logs]
        expected_outcomes: [identifies the database as the root cause]

Each case becomes a test whose body runs the agent with the prompt and context, checks every
required tool deterministically, and judges each expected outcome.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_health.errors import EvalFileError
from agent_health.loader.ids import content_hash, suite_name, test_id
from agent_health.loader.registry import FileRegistry, TestSpec
from agent_health.loader.types import LoadedTest
from agent_health.model import ExpectedStep, TestCase
from agent_health.model.case import to_context, to_expected_steps


def _parse(path: Path, rel: str) -> Any:
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            rows = []
            for n, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise EvalFileError(rel, f"invalid JSON: {exc.msg}", n) from exc
            return rows
        if suffix == ".json":
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise EvalFileError(rel, f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) from exc
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise EvalFileError(
                rel, f"invalid YAML: {getattr(exc, 'problem', exc)}", mark.line + 1 if mark else None
            ) from exc
    except UnicodeDecodeError as exc:
        raise EvalFileError(rel, f"not UTF-8 text: {exc.reason}") from exc


def _cases(doc: Any, rel: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if isinstance(doc, list):
        return doc, {}
    if isinstance(doc, dict):
        for key in ("tests", "testCases", "test_cases", "cases"):
            if isinstance(doc.get(key), list):
                return doc[key], dict(doc.get("defaults") or {})
        if "initialPrompt" in doc or "prompt" in doc:
            return [doc], {}
    raise EvalFileError(
        rel,
        "no test cases found: expected a list, an object with 'tests' or 'testCases', or one agent-health test case",
    )


def normalize(raw: dict[str, Any], defaults: dict[str, Any], rel: str, index: int) -> dict[str, Any]:
    """Map either format onto TestSpec fields; raises EvalFileError naming the case."""
    if not isinstance(raw, dict):
        raise EvalFileError(rel, f"case #{index + 1} is not an object")
    item = {**defaults, **raw}
    name = item.get("name") or item.get("id")
    if not name:
        raise EvalFileError(rel, f"case #{index + 1} has no 'name' or 'id'")
    prompt = item.get("prompt", item.get("initialPrompt"))
    if not isinstance(prompt, str) or not prompt.strip():
        raise EvalFileError(rel, f"case {name!r} has no prompt ('initialPrompt' or 'prompt')")
    labels = [*(item.get("labels") or []), *(item.get("tags") or [])]
    for key in ("category", "difficulty"):
        if item.get(key):
            labels.append(f"{key}:{item[key]}")
    steps = list(to_expected_steps(item.get("expectedTrajectory", item.get("expected_trajectory"))))
    tools = item.get("expected_tools") or item.get("expectedTools") or []
    if tools:
        steps.append(ExpectedStep(step=len(steps) + 1, description="required tools", required_tools=tuple(tools)))
    outcomes = item.get("expectedOutcomes", item.get("expected_outcomes")) or []
    if isinstance(outcomes, str):
        outcomes = [outcomes]
    return {
        "name": str(name),
        "prompt": prompt.strip(),
        "labels": tuple(dict.fromkeys(map(str, labels))),
        "description": item.get("description"),
        "context": to_context(item.get("context")),
        "expected_outcomes": tuple(map(str, outcomes)),
        "expected_trajectory": tuple(steps),
        "timeout_s": item.get("timeout"),
        "epochs": item.get("epochs"),
        "skip_judge": item.get("skip_judge", item.get("skipJudge")),
        "source_id": item.get("id"),
    }


def data_body(required_tools: tuple[str, ...], outcomes: tuple[str, ...]):
    """The body every data test runs: agent once, required tools checked, outcomes judged."""

    async def body(agent, expect, judge):
        result = await agent.run()
        for tool in required_tools:
            expect.soft(result).to_have_called_tool(tool)
        for outcome in outcomes:
            await judge(result, outcome)

    return body


def load_data_file(path: Path, rel: str) -> tuple[list[LoadedTest], list[EvalFileError]]:
    doc = _parse(path, rel)
    raw_cases, defaults = _cases(doc, rel)
    registry = FileRegistry(rel)
    suite = suite_name(rel)
    tests: list[LoadedTest] = []
    errors: list[EvalFileError] = []
    seen: dict[str, str] = {}
    for i, raw in enumerate(raw_cases):
        try:
            fields = normalize(raw, defaults, rel, i)
        except EvalFileError as exc:
            errors.append(exc)
            continue
        source_id = fields.pop("source_id")
        tid = test_id(suite, fields["name"])
        if tid in seen:
            errors.append(EvalFileError(rel, f"duplicate test name {fields['name']!r} (case #{i + 1})"))
            continue
        seen[tid] = fields["name"]
        tools = tuple(dict.fromkeys(t for s in fields["expected_trajectory"] for t in s.required_tools))
        spec = TestSpec(body=data_body(tools, fields["expected_outcomes"]), scope=registry.root, line=None, **fields)
        case = TestCase(
            id=tid,
            suite=suite,
            source_file=rel,
            kind="data",
            content_hash=content_hash(
                {
                    **{k: v for k, v in fields.items()},
                    "context": [c.model_dump() for c in fields["context"]],
                    "expected_trajectory": [s.model_dump() for s in fields["expected_trajectory"]],
                    "source_id": source_id,
                }
            ),
            **fields,
        )
        tests.append(LoadedTest(case, spec, registry))
    return tests, errors
