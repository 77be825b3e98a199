"""Human labels files: JSON lines or CSV, one label a line, each bad line named by file and line.

Fields (CSV: a header row naming them; JSONL: the keys of each object):

- `test_id` (required): the labelled test's id;
- `agent` (an agent version, KEY@VERSION) and/or `run_id` (an evaluation run): at least one;
- `criterion` (optional): the judged claim; without it the label applies to every verdict of the test;
- `label` (required): pass or fail (also true/false, 1/0, yes/no);
- `score`, `note`, `labeller`, `judge` (a judge key) (optional).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agent_health.errors import UsageError
from agent_health.model.calibration import Label

__all__ = ["FIELDS", "dump_labels", "load_labels", "parse_label"]

FIELDS = ("test_id", "agent", "run_id", "criterion", "label", "score", "note", "labeller", "judge")
_PASS = {"pass", "passed", "true", "1", "yes", "y"}
_FAIL = {"fail", "failed", "false", "0", "no", "n"}


def _text(value: Any, field: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be text, got {type(value).__name__}")  # noqa: TRY004 -- bad data in a labels file, reported with its line
    return value.strip() or None


def parse_label(row: Mapping[str, Any], where: str) -> Label:
    """One label from a row (a CSV row or a JSON object); ValueError says what is wrong."""
    unknown = sorted(str(k) for k in row if k not in FIELDS and k is not None)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(FIELDS)}")
    test_id = _text(row.get("test_id"), "test_id")
    if not test_id:
        raise ValueError("test_id is missing")
    agent, run_id = _text(row.get("agent"), "agent"), _text(row.get("run_id"), "run_id")
    if not agent and not run_id:
        raise ValueError("give agent (KEY@VERSION) or run_id: which result was labelled")
    raw = row.get("label")
    if isinstance(raw, bool):
        passed = raw
    elif isinstance(raw, str) and raw.strip().lower() in _PASS | _FAIL:
        passed = raw.strip().lower() in _PASS
    else:
        raise ValueError(f"label must be pass or fail, got {raw!r}")
    score: float | None = None
    if row.get("score") not in (None, ""):
        try:
            score = float(row["score"])
        except (TypeError, ValueError):
            raise ValueError(f"score must be a number from 0 to 1, got {row['score']!r}") from None
        if not 0 <= score <= 1:
            raise ValueError(f"score must be a number from 0 to 1, got {row['score']!r}")
    return Label(
        test_id=test_id,
        agent=agent,
        run_id=run_id,
        criterion=_text(row.get("criterion"), "criterion"),
        judge=_text(row.get("judge"), "judge"),
        passed=passed,
        score=score,
        note=_text(row.get("note"), "note") or "",
        labeller=_text(row.get("labeller"), "labeller") or "",
        source=where,
    )


def load_labels(path: Path) -> list[Label]:
    """Every label of a `.jsonl` or `.csv` file, or one UsageError naming the file and line.
    A later label of the same result, claim, judge and labeller replaces an earlier one."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's CSV may start with a BOM
    except OSError as exc:
        raise UsageError(f"labels file {path}: cannot read it: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"labels file {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if path.suffix.lower() == ".csv":
        rows = _csv_rows(path, text)
    elif path.suffix.lower() in (".jsonl", ".ndjson"):
        rows = _jsonl_rows(path, text)
    else:
        raise UsageError(f"labels file {path}: use a .jsonl or .csv file")
    labels: dict[tuple[Any, ...], Label] = {}
    for line, row in rows:
        try:
            label = parse_label(row, f"{path}:{line}")
        except ValueError as exc:
            raise UsageError(f"labels file {path}, line {line}: {exc}") from None
        labels.pop(label.key, None)  # the newer one goes last, as if written in its place
        labels[label.key] = label
    if not labels:
        raise UsageError(f"labels file {path}: holds no labels")
    return list(labels.values())


def _jsonl_rows(path: Path, text: str) -> Iterable[tuple[int, Mapping[str, Any]]]:
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"labels file {path}, line {n}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise UsageError(f"labels file {path}, line {n}: not a JSON object")
        yield n, row


def _csv_rows(path: Path, text: str) -> Iterable[tuple[int, Mapping[str, Any]]]:
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames:
        raise UsageError(f"labels file {path}: no header row (it names the fields: {', '.join(FIELDS)})")
    for row in reader:
        if None in row:  # more cells than header fields
            raise UsageError(f"labels file {path}, line {reader.line_num}: more cells than the header names")
        if not any((v or "").strip() for v in row.values()):
            continue
        yield reader.line_num, row


def dump_labels(labels: Iterable[Label]) -> str:
    """Labels as JSON lines in the file format `load_labels` reads."""
    out = []
    for label in labels:
        row = {
            "test_id": label.test_id,
            "agent": label.agent,
            "run_id": label.run_id,
            "criterion": label.criterion,
            "judge": label.judge,
            "label": "pass" if label.passed else "fail",
            "score": label.score,
            "note": label.note or None,
            "labeller": label.labeller or None,
        }
        out.append(json.dumps({k: v for k, v in row.items() if v is not None}))
    return "".join(line + "\n" for line in out)
