"""constraints.txt pins the versions the suite is tested with (issue 19: `pip install .` and the
dev venv got different dagster releases on the same day, and a new ruff could fail lint.sh):
every pin is what this venv has installed, every dependency of agent-health[dev] is pinned, and
scripts/_venv.sh installs with the file and reinstalls when it changes."""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

CONSTRAINTS = ROOT / "constraints.txt"


def pins() -> dict[str, str]:
    """Package (canonical name) -> pinned version."""
    out = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version and ";" not in version, f"constraints.txt: not a name==version pin: {line!r}"
        out[canonicalize_name(name)] = version
    return out


def dependencies(project: str, extras: frozenset[str]) -> set[str]:
    """Every distribution `project[extras]` needs here, followed through their own requirements
    (markers evaluated for this interpreter and the extras asked for)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(canonicalize_name(project), extras)]
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        for text in md.distribution(name).requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *wanted}):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return {name for name, _ in seen}


def test_the_constraints_pin_everything_but_the_project_itself():
    pinned = pins()
    assert len(pinned) > 100 and "agent-health" not in pinned
    assert {"dagster", "dagster-webserver", "pydantic", "ruff", "mypy", "pytest"} <= set(pinned)


def test_this_venv_has_exactly_the_pinned_versions():
    wrong = {}
    for name, version in pins().items():
        try:
            installed = md.version(name)
        except md.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = f"pinned {version}, installed {installed}"
    assert wrong == {}, "the venv is not the tested set; rerun scripts/_venv.sh or scripts/update_constraints.sh"


def test_every_dependency_of_the_project_and_its_dev_tools_is_pinned():
    needed = dependencies("agent-health", frozenset({"dev"})) - {"agent-health"}
    assert {"dagster", "ruff", "pytest"} <= needed
    assert sorted(needed - set(pins())) == [], "add them with scripts/update_constraints.sh"


def test_the_default_install_is_the_missions_packages_without_scipy():
    """Issue 36: statsmodels (with scipy, 213 MB of the 674 MB install) served Cohen's kappa alone,
    now computed in agent_health.analysis.calibration; the packages the mission keeps stay default."""
    default = dependencies("agent-health", frozenset())
    kept = {"dagster", "dagster-webserver", "pandas", "pydantic", "httpx", "opensearch-py", "boto3"}
    assert kept <= default
    assert {"statsmodels", "scipy", "patsy"} & default == set()


STUB_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../calls.log"
"""


def test_venv_script_installs_with_the_constraints_and_again_when_they_change(tmp_path):
    """scripts/_venv.sh on a copy of the project whose .venv python records what it is asked to do
    (instead of installing), so the script's own logic is what runs: the install command, and the
    stamp that decides whether to install."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "_venv.sh", tmp_path / "scripts" / "_venv.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(CONSTRAINTS, tmp_path / "constraints.txt")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STUB_PYTHON)
    python.chmod(0o755)
    calls = tmp_path / ".venv" / "calls.log"

    def source_venv_script() -> list[str]:
        before = calls.read_text().splitlines() if calls.exists() else []
        subprocess.run(
            ["bash", "-c", "source scripts/_venv.sh"],
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
            check=True,
            capture_output=True,
            timeout=60,
        )
        return (calls.read_text().splitlines() if calls.exists() else [])[len(before) :]

    assert "-m pip install -c constraints.txt -e .[dev]" in source_venv_script()
    assert [c for c in source_venv_script() if "pip" in c] == []  # installed, nothing changed: no install
    stamps = list((tmp_path / ".venv").glob(".installed-*"))
    ruff = f"ruff=={pins()['ruff']}"
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(constraints.read_text().replace(ruff, "ruff==0.0.1"))
    assert "-m pip install -c constraints.txt -e .[dev]" in source_venv_script()  # a new pin reinstalls
    new_stamps = list((tmp_path / ".venv").glob(".installed-*"))
    assert len(stamps) == len(new_stamps) == 1 and stamps != new_stamps


STUB_INTERPRETER = """#!/bin/sh
# `python -m venv DIR` makes DIR/bin/python a recorder that answers `pip freeze` with one pin
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"
  printf '#!/bin/sh\\necho "$*" >> "%s"\\n' "$CALLS" > "$3/bin/python"
  echo 'case "$*" in *"pip freeze"*) echo "only==1.0";; esac' >> "$3/bin/python"
  chmod +x "$3/bin/python"
fi
"""


def test_update_constraints_keep_installs_with_the_current_pins(tmp_path):
    """scripts/update_constraints.sh with an interpreter whose venvs record what pip is asked to do:
    `--keep` installs the fresh venv constrained by the current file (only what pyproject.toml
    changed can move), a plain run unconstrained; both write the fresh venv's freeze."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "update_constraints.sh", tmp_path / "scripts" / "update_constraints.sh")
    shutil.copy(CONSTRAINTS, tmp_path / "constraints.txt")
    interpreter = tmp_path / "python3"
    interpreter.write_text(STUB_INTERPRETER)
    interpreter.chmod(0o755)
    calls = tmp_path / "calls.log"

    def update(*args: str) -> list[str]:
        calls.write_text("")
        subprocess.run(
            ["bash", "scripts/update_constraints.sh", *args],
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHON": str(interpreter), "CALLS": str(calls)},
            check=True,
            capture_output=True,
            timeout=60,
        )
        return [c for c in calls.read_text().splitlines() if "pip install" in c]

    pinned = f"-c {tmp_path}/constraints.txt"
    installs = update("--keep")
    assert len(installs) == 2 and all(pinned in c for c in installs), installs
    assert installs[-1].endswith("-e .[dev]")
    assert (tmp_path / "constraints.txt").read_text().splitlines()[-1] == "only==1.0"
    installs = update()
    assert len(installs) == 2 and not any("-c " in c for c in installs), installs
    bad = subprocess.run(
        ["bash", "scripts/update_constraints.sh", "--newest"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "usage" in bad.stderr
