"""Data test cases: JSON, YAML and JSONL, in agent-health's exported format or the native one.

agent-health format (one object, a list, or `{"testCases": [...]}`)::

    {"id": "tc-1", "name": "...", "description": "...", "category": "RCA", "difficulty": "Hard",
     "labels": [...] | "tags": [...], "initialPrompt": "...",
     "context": [{"description": "...", "value": "..."}] | [{"type": "...", "content": "..."}],
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

import codecs
import functools
import json
import operator
import re
from array import array
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import yaml
from pydantic import ValidationError

from agent_health.errors import EvalFileError
from agent_health.loader import safe_yaml
from agent_health.loader.formats import Defaults, case_model, steps_of
from agent_health.loader.ids import canonical_value_json, content_hash, name_problem, shown_name, suite_name, test_id
from agent_health.loader.options import one_or_many
from agent_health.loader.registry import NO_FIXTURES, FileRegistry
from agent_health.loader.strict_json import LONG_NUMBER, long_number_line, read_json, unique_object
from agent_health.loader.types import LoadedDataTest, LoadedTest
from agent_health.model import ContextItem, ExpectedStep
from agent_health.model.case import CASE_REST, shared_value
from agent_health.model.validation import describe_errors

CASE_LISTS = ("tests", "testCases", "test_cases", "cases")


class _Row:
    """One raw case and where it came from (the line, where the format tells)."""

    def __init__(self, raw: Any, line: int | None = None, error: EvalFileError | None = None):
        self.raw, self.line, self.error = raw, line, error


def _decode(data: bytes, rel: str, line_offset: int = 0) -> str:
    try:  # a byte-order mark is accepted in every format, as Python and YAML files accept it
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise EvalFileError(
            rel,
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column} ({exc.reason}); save the file as UTF-8",
            line + line_offset,
        ) from None


def _jsonl_rows(data: bytes, rel: str) -> list[_Row]:
    """One row per non-blank line; a bad line is an error of its own, the others still load."""
    rows = []
    for n, chunk in enumerate(data.split(b"\n"), start=1):
        if not chunk.strip():
            continue
        try:
            rows.append(_Row(read_json(_decode(chunk, rel, n - 1), rel, n - 1), n))
        except EvalFileError as exc:
            rows.append(_Row(None, n, exc))
    return rows


def _parse(text: str, suffix: str, rel: str) -> tuple[Any, list[int]]:
    """The document and, where known, the line of each case (YAML)."""
    if suffix == ".json":
        return read_json(text, rel), []
    try:
        doc, root = safe_yaml.load(text)
    except safe_yaml.DuplicateKey as exc:  # said as for JSON: the key and the line of its second place
        raise EvalFileError(rel, exc.problem, exc.problem_mark.line + 1) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise EvalFileError(rel, f"invalid YAML: {problem}", mark.line + 1 if mark else None) from None
    except ValueError:  # an integer past Python's digit limit
        raise EvalFileError(rel, f"invalid YAML: {LONG_NUMBER}", long_number_line(text)) from None
    return doc, safe_yaml.item_lines(root, CASE_LISTS)


def _cases(doc: Any, rel: str) -> tuple[list[Any], Any]:
    """(raw cases, raw defaults) of a parsed document."""
    if isinstance(doc, list):
        return doc, None
    if isinstance(doc, dict):
        for key in CASE_LISTS:
            if key in doc:
                cases = one_or_many(doc[key])
                if not isinstance(cases, list):
                    raise EvalFileError(
                        rel, f"{key!r} must be a list of test cases, got {type(cases).__name__} {cases!r:.60}"
                    )
                return cases, doc.get("defaults")
        if "initialPrompt" in doc or "prompt" in doc:
            return [doc], None
    raise EvalFileError(
        rel,
        "no test cases found: expected a list, an object with 'tests' or 'testCases', or one agent-health test case",
    )


def _defaults(raw: Any, rel: str) -> Defaults:
    if raw is None:
        return Defaults()
    if not isinstance(raw, Mapping):
        raise EvalFileError(rel, f"defaults: expected an object of case fields, got {type(raw).__name__}")
    try:
        return Defaults.model_validate(raw)
    except ValidationError as exc:
        raise EvalFileError(rel, "defaults: " + describe_errors(exc)) from None


def _ident(raw: Any, index: int) -> str:
    where = f"case #{index + 1}"  # the line, when known, leads the message (file:line)
    if isinstance(raw, Mapping):
        for key in ("id", "name"):
            if isinstance(raw.get(key), (str, int)) and str(raw[key]).strip():
                return f"{where} {shown_name(str(raw[key]))}"
    return where


def normalize(raw: Any, defaults: Defaults, rel: str, index: int, line: int | None = None) -> dict[str, Any]:
    """Validate one case of either format and map it onto TestSpec fields (plus `source_id`);
    raises EvalFileError naming the file, the case (index, line, id) and the field."""
    if not isinstance(raw, Mapping):
        raise EvalFileError(
            rel, f"{_ident(raw, index)}: expected an object of case fields, got {type(raw).__name__}", line
        )
    try:
        case = case_model(raw).__pydantic_validator__.validate_python(raw)  # model_validate's own call
    except ValidationError as exc:
        raise EvalFileError(rel, f"{_ident(raw, index)}: {describe_errors(exc)}", line) from None

    # each field: the case's own value, else the file's default (one dict, not a lookup per field)
    values = defaults.__dict__ | {field: case.__dict__[field] for field in case.model_fields_set}
    pick = values.__getitem__

    name = pick("name") or pick("id")
    if not name:
        raise EvalFileError(rel, f"{_ident(raw, index)}: has no 'name' or 'id'", line)
    if problem := name_problem(name):
        raise EvalFileError(rel, f"case #{index + 1} {shown_name(name)}: {problem}", line)
    prompt = pick("prompt")
    user = pick("user")
    if not prompt and user is None:
        raise EvalFileError(rel, f"{_ident(raw, index)}: has no prompt ('prompt' or 'initialPrompt')", line)
    if user is not None and pick("turns"):
        raise EvalFileError(
            rel, f"{_ident(raw, index)}: give turns (a script) or user (a simulated user), not both", line
        )
    labels = [*pick("labels"), *pick("tags")]
    labels += [f"{key}:{pick(key)}" for key in ("category", "difficulty") if pick(key)]
    trajectory = pick("expected_trajectory")
    if not trajectory:  # the usual case: one object for the cases that name the same tools
        steps = _tools_steps(tuple(pick("expected_tools") or ()))
    else:
        steps = steps_of(trajectory)
        if pick("expected_tools"):
            steps += (_tools_step(len(steps) + 1, tuple(pick("expected_tools"))),)
    return {
        "name": name,
        "prompt": prompt,
        "labels": tuple(dict.fromkeys(labels)),
        "description": pick("description"),
        "context": tuple(c.item() for c in pick("context")),
        "turns": pick("turns"),
        "user": user,
        "expected_outcomes": pick("expected_outcomes"),
        "expected_trajectory": steps,
        "timeout_s": pick("timeout"),
        "epochs": pick("epochs"),
        "skip_judge": pick("skip_judge"),
        "max_cost_usd": pick("max_cost_usd"),
        "source_id": pick("id"),
    }


@functools.lru_cache(maxsize=1024)
def _tools_steps(tools: tuple[str, ...]) -> tuple[ExpectedStep, ...]:
    """The expected steps of a case with `expected_tools` and no `expected_trajectory`: one tuple
    for the cases that name the same tools, which the loader then shares by identity."""
    return (_tools_step(1, tools),) if tools else ()


@functools.lru_cache(maxsize=1024)
def _tools_step(step: int, tools: tuple[str, ...]) -> ExpectedStep:
    """The expected step of a case's `expected_tools`: one object for the cases that name the same
    tools (steps are frozen), made and validated once, not for every case."""
    return ExpectedStep(step=step, description="required tools", required_tools=tools)


def data_body(required_tools: tuple[str, ...], outcomes: tuple[str, ...]) -> Callable[..., Awaitable[None]]:
    """The body every data test runs: agent once, required tools checked, outcomes judged."""

    async def body(agent: Any, expect: Any, judge: Any) -> None:  # the engine's fixtures (capabilities: a layer above)
        result = await agent.run()
        for tool in required_tools:
            expect.soft(result).to_have_called_tool(tool)
        for outcome in outcomes:
            await judge(result, outcome)

    return body


def load_data_file(path: Path, rel: str) -> tuple[list[LoadedTest], list[EvalFileError]]:
    """The file's valid cases as tests, and one error per malformed case (or for the whole file
    when it cannot be parsed at all); the valid cases load whatever their neighbours hold.

    What only loading needs goes as soon as it is used (the file's bytes once decoded, each
    parsed case once it became a test), and a JSON list of cases is read and parsed a piece at a
    time: at the end of a 50,000-case file the whole parsed document, and then the file's whole
    text, was still alive beside its tests (about 90 bytes a case)."""
    errors: list[EvalFileError] = []
    rows: Iterable[_Row]
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            with path.open("rb") as fh:
                return _load_rows((_Row(raw) for raw in _json_items(_text_pieces(fh))), Defaults(), rel, errors)
        except _NotStreamed:  # not a list, or not valid JSON: parsed whole below (json names the error)
            errors.clear()
    data = path.read_bytes()
    if suffix == ".jsonl":
        found = _jsonl_rows(data, rel)
        del data
        errors.extend(r.error for r in found if r.error is not None)
        kept: list[_Row | None] = [r for r in found if r.error is None]
        del found
        rows = _taken(kept)
        return _load_rows(rows, Defaults(), rel, errors)
    text = _decode(data, rel)
    del data
    doc, lines = _parse(text, suffix, rel)
    del text
    raw_cases, raw_defaults = _cases(doc, rel)
    defaults = _defaults(raw_defaults, rel)
    parsed: list[_Row | None] = [_Row(raw, lines[i] if i < len(lines) else None) for i, raw in enumerate(raw_cases)]
    del doc, raw_cases, raw_defaults, lines
    rows = _taken(parsed)
    return _load_rows(rows, defaults, rel, errors)


def _taken(rows: list[_Row | None]) -> Iterator[_Row]:
    """The rows in order, each let go by the list as it is taken."""
    for i, row in enumerate(rows):
        rows[i] = None
        assert row is not None
        yield row


_SPACE = re.compile(r"[ \t\n\r]*")
_ITEM = json.JSONDecoder(object_pairs_hook=unique_object)
_PIECE = 1 << 20  # bytes of a JSON file read at a time


class _NotStreamed(Exception):
    """The document is not a valid JSON list of values: `read_json` parses it whole and names the error."""


def _text_pieces(fh: BinaryIO) -> Generator[str, int | None, None]:
    """The text of a binary file, decoded (UTF-8, a byte-order mark dropped) `_PIECE` bytes at a
    time, then `size` bytes when the reader sends a larger size (a value longer than a piece:
    reading it in ever larger pieces parses it a few times, not once per piece). A byte that is
    not UTF-8 raises _NotStreamed (the whole file's decoding names it)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    size = _PIECE
    try:
        while data := fh.read(size):
            asked = yield decoder.decode(data)
            size = max(_PIECE, asked or 0)
        yield decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise _NotStreamed from exc


def _json_items(pieces: Generator[str, int | None, None]) -> Iterator[Any]:
    """The values of the JSON list whose text comes in `pieces`, parsed one at a time (as
    `read_json` parses them: duplicate keys refused); only the text not parsed yet is kept.
    Anything else, or anything invalid, raises _NotStreamed, even after values were given."""
    buf, at, more = "", 0, True

    def read(at_least: int = 0) -> bool:
        """More text after what is left of `buf` (False at the end of the file)."""
        nonlocal buf, at, more
        while more:
            try:
                piece = pieces.send(at_least) if at_least else next(pieces)
            except StopIteration:
                more = False
                break
            if piece:
                buf, at = buf[at:] + piece, 0
                return True
        return False

    def next_char() -> str:
        """The next character that is not white space ('' at the end), `at` on it."""
        nonlocal at
        while True:
            at = _SPACE.match(buf, at).end()  # type: ignore[union-attr]
            if at < len(buf) or not read():
                return buf[at : at + 1]

    try:
        if next_char() != "[":
            raise _NotStreamed
        at += 1
        if next_char() == "]":
            at += 1
        else:
            while True:
                next_char()  # `at` on the value
                try:
                    value, end = _ITEM.raw_decode(buf, at)
                except ValueError:  # incomplete, or invalid: with the rest of the file, or not at all
                    if read(2 * (len(buf) - at)):
                        continue
                    raise
                if end == len(buf) and read():  # a number or a literal may go on in the next piece
                    continue
                at = end
                yield value
                c = next_char()
                if c == "]":
                    at += 1
                    break
                if c != ",":
                    raise _NotStreamed
                at += 1
        if next_char() != "":
            raise _NotStreamed  # something after the list
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a duplicate key, a huge number
        raise _NotStreamed from exc


def _load_rows(
    rows: Iterable[_Row], defaults: Defaults, rel: str, errors: list[EvalFileError]
) -> tuple[list[LoadedTest], list[EvalFileError]]:
    registry = FileRegistry(rel)
    suite = suite_name(rel)
    tests: list[LoadedTest] = []
    case_of = array("L")  # the case number of each test (its row), for a duplicate's error
    found: list[tuple[int, EvalFileError]] = []  # the cases' errors, by case number
    # One copy of what many cases repeat (the parser makes a new string for every occurrence of a
    # prompt, label or tool) and one body per distinct expectations: a suite of 50,000 cases
    # holds each once. Every data test shares one (scope, fixtures, suite judges).
    shared: dict[Any, Any] = {}
    dumps: dict[int, dict[str, Any]] = {}  # id of a shared context item or step -> its model_dump()
    texts: dict[int, tuple[Any, str]] = {}  # id of a shared value -> (it, its JSON in the content hash)
    bodies: dict[tuple[tuple[str, ...], tuple[str, ...]], Callable[..., Awaitable[None]]] = {}
    tools_of: dict[int, tuple[str, ...]] = {}  # id of a shared tuple of steps -> the tools they require
    last_steps: tuple[Any, Any] = (None, None)  # the last case's steps as it came, and shared
    run = (registry.root, NO_FIXTURES, True)
    for i, row in enumerate(rows):
        try:
            fields = normalize(row.raw, defaults, rel, i, row.line)
        except EvalFileError as exc:
            found.append((i, exc))
            continue
        source_id = fields.pop("source_id")
        tid = test_id(suite, fields["name"])
        # the steps of cases that only name tools are one object (`_tools_steps`): shared once, not
        # hashed and looked up again for every case (a step's hash and equality are pydantic's, in Python)
        if fields["expected_trajectory"] is not last_steps[0]:
            last_steps = (fields["expected_trajectory"], shared_value(fields["expected_trajectory"], shared))
        fields["expected_trajectory"] = last_steps[1]
        for name in _SHARED_FIELDS:
            value = fields[name]
            if value and isinstance(value, _SHAREABLE):  # (an empty text or tuple is one object already)
                fields[name] = shared_value(value, shared)
        steps = fields["expected_trajectory"]  # a shared tuple: the tools of the file's equal ones found once
        tools = tools_of.get(id(steps))
        if tools is None:
            tools = tools_of[id(steps)] = tuple(dict.fromkeys(t for s in steps for t in s.required_tools))
        key = (tools, fields["expected_outcomes"])
        body = bodies.get(key) or bodies.setdefault(key, data_body(*key))
        hashed = dict(fields)
        # the cap, the turns and the simulated user are hashed only when set: cases without them keep their hash
        if hashed["max_cost_usd"] is None:
            del hashed["max_cost_usd"]
        if hashed["turns"]:
            hashed["turns"] = list(hashed["turns"])
        else:
            del hashed["turns"]
        if hashed["user"] is None:
            del hashed["user"]
        else:
            hashed["user"] = hashed["user"].definition()
        hashed["source_id"] = source_id
        # the JSON of what many cases share (their labels, outcomes, context and steps), made once;
        # it stands for those values in the hash (context items and steps as their model_dump())
        known = {field: _shared_json(fields[field], texts, dumps) for field in _SHARED_JSON}
        fields.update(suite=suite, source_file=rel, kind="data")
        rest = _REST(fields)  # what the file's cases mostly share: one tuple
        try:
            rest = shared.setdefault(rest, rest)
        except TypeError:  # an unhashable value after all: this case's own tuple
            pass
        tests.append(
            LoadedDataTest(
                registry, body, run, tid, fields["name"], row.line, content_hash(hashed, known), fields["prompt"], rest
            )
        )
        case_of.append(i)
    if len(tests) > 1:
        tests = _without_duplicates(tests, case_of, rel, found)
    errors.extend(error for _, error in sorted(found, key=_FIRST))
    return tests, errors


_FIRST = operator.itemgetter(0)
_REST = operator.itemgetter(*CASE_REST)
_SHAREABLE = (str, tuple, ExpectedStep, ContextItem)  # what `shared_value` shares; the rest is kept as it is
# the fields of `normalize` whose values cases repeat (not the name, a test's own; the steps are
# shared above): the texts and tuples of texts among them
_SHARED_FIELDS = ("prompt", "labels", "description", "context", "turns", "expected_outcomes")
_ID = operator.attrgetter("id")


def _without_duplicates(
    tests: list[LoadedTest], case_of: array[int], rel: str, found: list[tuple[int, EvalFileError]]
) -> list[LoadedTest]:
    """`tests` without a test whose id an earlier case of the file has (`found` gets its error).
    Found by sorting the ids: a set of them was 40 to 80 bytes a test at the peak of loading."""
    by_id = sorted(tests, key=_ID)
    twice = {by_id[k].id for k in range(1, len(by_id)) if by_id[k].id == by_id[k - 1].id}
    del by_id
    if not twice:
        return tests
    first: set[str] = set()  # the ids met twice whose first test is kept
    kept = []
    for k, t in enumerate(tests):
        if t.id in twice:
            if t.id in first:
                case, i = t.case, case_of[k]
                found.append((i, EvalFileError(rel, f"duplicate test name {case.name!r} (case #{i + 1})", case.line)))
                continue
            first.add(t.id)
        kept.append(t)
    return kept


_SHARED_JSON = ("labels", "expected_outcomes", "context", "expected_trajectory")  # tuples the cases share
_TEXTS_KEPT = 1024  # distinct shared tuples whose JSON is kept at once (a file's cases seldom have more)
_TEXT_KEPT_CHARS = 4096  # a longer JSON is made for each case: a few megabytes at most are kept


def _shared_json(value: tuple[Any, ...], texts: dict[int, tuple[Any, str]], dumps: dict[int, dict[str, Any]]) -> str:
    """The JSON a case's shared tuple has inside its content hash (`canonical_json`; context items
    and steps as their `model_dump()`), made once per distinct tuple. `texts` keeps the tuple
    with its text: while it is there, no other object can have its id."""
    found = texts.get(id(value))
    if found is not None:
        return found[1]
    text = canonical_value_json([_dumped(v, dumps) if isinstance(v, _DUMPED) else v for v in value])
    if len(text) <= _TEXT_KEPT_CHARS:
        if len(texts) >= _TEXTS_KEPT:
            texts.clear()
        texts[id(value)] = (value, text)
    return text


_DUMPED = (ContextItem, ExpectedStep)


def _dumped(model: ContextItem | ExpectedStep, dumps: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """`model.model_dump()` of a shared item, made once per file (the items live in the file's
    shared values while it loads, so their ids are theirs)."""
    found = dumps.get(id(model))
    if found is None:
        found = dumps[id(model)] = model.model_dump()
    return found
