"""The public names of `agent_health` are written once, in its stub (agent_health/__init__.pyi):
type checkers read it for what each name is, and the package reads it for where each name comes
from, its `__all__` and its `dir()`. A name added there is importable, listed and resolved, and the
stub ships with the package."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys

import agent_health
from agent_health.lazy import stub_names

from ..conftest import ROOT

STUB = ROOT / "agent_health" / "__init__.pyi"


def _stub_public_names() -> set[str]:
    """Every name the stub declares public, read independently of agent_health.lazy: each
    `import NAME as NAME` and each annotated name."""
    tree = ast.parse(STUB.read_text())
    names = {a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names if a.asname == a.name}
    return names | {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def test_the_runtime_names_are_the_stubs_names():
    declared = _stub_public_names()
    assert set(agent_health.__all__) == declared and len(agent_health.__all__) == len(declared)
    assert declared <= set(dir(agent_health))
    assert {"agent", "__version__", "test", "expect", "RunResult"} <= declared
    for name in declared:  # each resolves, and to the object its stub line names
        value = getattr(agent_health, name)
        module = agent_health._LAZY.get(name)
        if module is not None:
            assert value is getattr(sys.modules[module], name), name
    assert agent_health.__version__ == "0.1.0"
    assert type(agent_health.agent).__name__ == "AgentProxy"


def test_stub_names_reads_reexports_and_annotations_and_skips_private_imports(tmp_path):
    init = tmp_path / "pkg" / "__init__.py"
    init.parent.mkdir()
    init.write_text("")
    init.with_suffix(".pyi").write_text(
        "from typing import Any\n"  # the stub's own helper, not public
        "from pkg.a import One as One, two as two\n"
        "from .b import Three as Three\n"
        "from pkg.c import Hidden\n"
        "__version__: str\n"
        "thing: Any\n"
    )
    lazy, own = stub_names(str(init), "pkg")
    assert lazy == {"One": "pkg.a", "two": "pkg.a", "Three": "pkg.b"}
    assert own == ("__version__", "thing")


ADDED = "from agent_health.model import Shard as Shard\n"

CHECK = """
import json, sys
import agent_health
assert agent_health.__file__.startswith(sys.argv[1]), agent_health.__file__
from agent_health import Shard
from agent_health.model.settings import Shard as defined
namespace = {}
exec("from agent_health import *", namespace)
print(json.dumps({
    "same": Shard is defined,
    "in_all": "Shard" in agent_health.__all__,
    "in_dir": "Shard" in dir(agent_health),
    "star": "Shard" in namespace,
}))
"""


def test_a_name_added_to_the_stub_is_importable_listed_and_resolved(tmp_path):
    """The library copied with one more line in its stub, and nothing else: the name imports,
    is in `__all__`, `dir()` and a star import, and is the defining module's object."""
    copy = tmp_path / "lib"
    shutil.copytree(ROOT / "agent_health", copy / "agent_health", ignore=shutil.ignore_patterns("__pycache__"))
    stub = copy / "agent_health" / "__init__.pyi"
    stub.write_text(stub.read_text() + ADDED)
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(copy)],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(copy), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == {"same": True, "in_all": True, "in_dir": True, "star": True}


def test_the_stub_and_the_typed_marker_ship_in_the_package(tmp_path):
    """What setuptools puts in the wheel (build_py: modules and package data) holds the stub the
    package reads on import, and PEP 561's py.typed, so type checkers read the stub of an installed
    package too."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for package in ("agent_health", "agent_health_dagster"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = tmp_path / "built"
    done = subprocess.run(
        [sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py", "--build-lib", str(built)],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (built / "agent_health" / "__init__.pyi").read_text() == STUB.read_text()
    assert (built / "agent_health" / "py.typed").exists()


# The modules a user may import besides agent_health and its packages: the bases a plugin subclasses
# (docs/extending.md). Every other module is implementation (CONTRIBUTING.md, "The public surface").
PUBLIC_MODULES = {"agent_health.connectors.base", "agent_health.judges.base", "agent_health.judges.chat"}


def _user_imports() -> dict[str, set[str]]:
    """agent_health modules imported by what users read and copy: README, docs/, the shipped evals
    and the plugin fixture package (a third party's view)."""
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "evals").rglob("*.py"))]
    texts += sorted((ROOT / "tests" / "fixtures" / "ah_plugin").rglob("*.py"))
    found: dict[str, set[str]] = {}
    for path in texts:
        for module in re.findall(r"(?:from|import) (agent_health(?:\.\w+)*)", path.read_text()):
            found.setdefault(module, set()).add(str(path.relative_to(ROOT)))
    return found


def test_users_import_only_the_package_its_packages_and_the_plugin_bases():
    packages = {f"agent_health.{p.parent.name}" for p in (ROOT / "agent_health").glob("*/__init__.py")}
    allowed = {"agent_health", *packages, *PUBLIC_MODULES}
    found = _user_imports()
    assert "agent_health.connectors.base" in found  # the scan reads the docs it should
    stray = {m: sorted(where) for m, where in found.items() if m not in allowed}
    assert not stray, f"implementation modules imported by user-facing code (CONTRIBUTING.md): {stray}"
    for module in PUBLIC_MODULES:
        assert f"`{module.replace('.', '/')}.py`" in (ROOT / "docs" / "extending.md").read_text(), module
