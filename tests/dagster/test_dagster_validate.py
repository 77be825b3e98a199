"""`dagster definitions validate` passes from the project root (the webserver's view of the code
location is tested under the live `dagster dev` in test_dagster_live.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import skip_or_fail

pytestmark = pytest.mark.filterwarnings("ignore")

ROOT = Path(__file__).resolve().parents[2]


def test_dagster_definitions_validate_passes_from_the_root(project_dir):
    exe = shutil.which("dagster", path=str(Path(sys.executable).parent))
    if exe is None:
        skip_or_fail("the dagster CLI is not installed next to the Python interpreter")
    env = {**os.environ, "AGENT_HEALTH_CONFIG": str(project_dir / "agent_health_config.py"), "PYTHONPATH": str(ROOT)}
    env.pop("DAGSTER_HOME", None)
    proc = subprocess.run(
        [exe, "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Validation successful" in proc.stdout + proc.stderr


def test_dg_check_defs_loads_the_code_location(project_dir):
    """`dg` (dagster-dg-cli, in the dev extra, released in step with dagster) with [tool.dg]."""
    exe = os.environ.get("AGENT_HEALTH_DG") or shutil.which("dg", path=str(Path(sys.executable).parent))
    if exe is None:
        skip_or_fail("dg is not installed next to the Python interpreter (pip install dagster-dg-cli)")
    venv = Path(sys.executable).parent.parent
    env = {
        **os.environ,
        "AGENT_HEALTH_CONFIG": str(project_dir / "agent_health_config.py"),
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("DAGSTER_HOME", None)
    proc = subprocess.run([exe, "check", "defs"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "All definitions loaded successfully" in proc.stdout + proc.stderr
