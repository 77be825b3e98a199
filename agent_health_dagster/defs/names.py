"""Dagster-safe names for suites: asset key prefixes, group names and partition set names.

Suite names are eval file paths ('rca/payments', 'smoke-checks'); asset key parts, group names
and partition definition names allow only [A-Za-z0-9_]."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
RESERVED_PREFIXES = ("benchmark", "agents", "judges")  # asset key prefixes the code location uses itself
REFRESH_JOB = "refresh"  # everything downstream of the results, for a range of agent versions
LEADERBOARD_KEY = ["benchmark", "leaderboard"]
COMPARISON_KEY = ["benchmark", "comparison"]
LABELS_KEY = ["judges", "labels"]
CALIBRATION_KEY = ["judges", "calibration"]
CALIBRATE_JOB = "calibrate"
JUDGE_IDENTITIES = "judge_identities"  # the calibration asset's partitions: one per judge identity


def safe(part: str) -> str:
    text = _UNSAFE.sub("_", part).strip("_")
    return text if text and not text[0].isdigit() else f"s_{text}"


@dataclass(frozen=True)
class SuiteNames:
    """Every Dagster name derived from one suite."""

    suite: str
    prefix: tuple[str, ...]

    @property
    def flat(self) -> str:
        return "__".join(self.prefix)

    @property
    def group(self) -> str:
        return f"suite_{self.flat}"

    @property
    def tests_partitions(self) -> str:
        return f"tests__{self.flat}"

    @property
    def job(self) -> str:
        return f"evaluate__{self.flat}"

    @property
    def step(self) -> str:
        """Name of the one evaluation step (the multi-asset's op; run config goes under it)."""
        return f"{self.flat}__evaluate"


def suite_names(suites: Iterable[str], namespace: tuple[str, ...] = ()) -> dict[str, SuiteNames]:
    """Names for every suite; two suites that sanitize alike ('a-b', 'a_b') get a hash suffix.
    `namespace`: the eval root's key prefix (`Namespace.key_prefix`), the first part of every name."""
    out: dict[str, SuiteNames] = {}
    taken: set[tuple[str, ...]] = set()
    for suite in sorted(suites):
        prefix = tuple(safe(p) for p in suite.split("/") if p) or ("suite",)
        if prefix in taken or prefix[0] in RESERVED_PREFIXES:
            prefix = (*prefix[:-1], f"{prefix[-1]}_{hashlib.sha1(suite.encode()).hexdigest()[:6]}")
        taken.add(prefix)
        out[suite] = SuiteNames(suite, (*namespace, *prefix))
    return out
