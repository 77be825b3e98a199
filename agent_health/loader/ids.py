"""Stable test ids (valid Dagster partition keys) and content hashes."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import PurePosixPath
from typing import Any

_UNSAFE = re.compile(r"[^a-z0-9]+")
_SUITE_UNSAFE = re.compile(r"[^A-Za-z0-9_./-]+")
CODE_SUFFIX = ".eval.py"
DATA_SUFFIXES = (".json", ".yaml", ".yml", ".jsonl")


def slug(text: str) -> str:
    """'Checkout > Happy path!' -> 'checkout/happy-path'."""
    parts = [_UNSAFE.sub("-", p.lower()).strip("-") for p in text.split(" > ")]
    return "/".join(p or "_" for p in parts)


def suite_name(relative_path: str) -> str:
    """'rca/payments.eval.py' -> 'rca/payments'; 'cases.json' -> 'cases'."""
    path = relative_path.replace("\\", "/")
    for suffix in (CODE_SUFFIX, *DATA_SUFFIXES):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return _SUITE_UNSAFE.sub("-", str(PurePosixPath(path))).strip("-") or "suite"


def test_id(suite: str, name: str) -> str:
    return f"{suite}::{slug(name)}"


def content_hash(payload: dict[str, Any]) -> str:
    blob = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
