"""The library and the code location use Dagster's public API only, and importing the code
location changes nothing in the environment."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def private_imports(folder: Path) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                if parts[0].startswith("dagster") and any(p.startswith("_") for p in parts[1:]):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
        if "dagster._" in path.read_text():
            found.append(f"{path.relative_to(ROOT)}: mentions dagster._")
    return found


def test_no_private_dagster_import_in_the_library_or_the_code_location():
    assert private_imports(ROOT / "agent_health") == []
    assert private_imports(ROOT / "agent_health_dagster") == []


def test_importing_the_code_location_sets_no_environment_variable(tmp_path):
    script = (
        "import json, os, sys\n"
        "before = dict(os.environ)\n"
        "import agent_health_dagster, agent_health_dagster.defs.build, agent_health_dagster.headless\n"
        "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_EVENT")}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_dagster_pin_has_no_upper_cap():
    text = (ROOT / "pyproject.toml").read_text()
    deps = [line for line in text.splitlines() if line.strip().startswith('"dagster')]
    assert deps and all("<" not in line.split("#")[0] for line in deps), deps
    assert "[tool.dg]" in text and 'code_location_target_module = "agent_health_dagster.definitions"' in text


def test_the_wheel_ships_no_generic_top_level_package(tmp_path):
    """The code location is `agent_health_dagster`, not a top-level `definitions` that would collide
    with other projects; an installed package's next step names that module, not a workspace.yaml."""
    import tomllib

    from setuptools import find_packages

    from agent_health_dagster.headless import dev_command

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    top = {p.split(".")[0] for p in find_packages(str(ROOT), include=config["include"])}
    assert top == {"agent_health", "agent_health_dagster"}
    installed = dev_command(tmp_path / "home", checkout=tmp_path)  # no scripts/ beside it
    assert "dev -m agent_health_dagster.definitions" in installed and "workspace.yaml" not in installed
    assert "DAGSTER_GRPC_TIMEOUT_SECONDS=180" in installed  # with the deployment's settings
    assert dev_command(tmp_path / "home").endswith("scripts/dev.sh")  # from the checkout
