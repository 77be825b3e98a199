"""What a run worker's machine does before any run: register the code location's partitions on
`DagsterInstance.get()` in the worker's environment, then launch runs with the `dagster` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tests.support.timing import scaled

DAGSTER = str(Path(sys.executable).parent / "dagster")  # the CLI beside this interpreter

PLAN = """
import json
from dagster import DagsterInstance
from agent_health_dagster.defs.build import build_pipeline
from agent_health_dagster.headless import register
pipeline = build_pipeline()
with DagsterInstance.get() as instance:
    problems = register(instance, pipeline)
    print(json.dumps({"problems": problems, "suites": {
        s.names.job: instance.get_dynamic_partitions(s.names.tests_partitions) for s in pipeline.suites}}))
"""


def register_partitions(env: dict[str, str]) -> dict[str, Any]:
    """Run `PLAN` in `env`: {"problems": [...], "suites": {evaluate job: [test partitions]}}."""
    out = subprocess.run(
        [sys.executable, "-c", PLAN], cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(300)
    )
    assert out.returncode == 0, out.stderr[-3000:]
    plan: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return plan
