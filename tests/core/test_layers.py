"""The package layout is a layered data flow: no import cycles between packages, errors and the
data model at the bottom, the sdk at the top, and no Dagster in the library."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "agent_health"


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported_modules(path: Path) -> list[str]:
    """Absolute module names `path` imports, inside functions and TYPE_CHECKING blocks too."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """Package -> packages it imports, counting imports inside functions and TYPE_CHECKING blocks."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in LIB.rglob("*.py"):
        rel = path.relative_to(LIB.parent).with_suffix("")
        me = package_of(".".join(rel.parts))
        for name in imported_modules(path):
            if name == "agent_health" or name.startswith("agent_health."):
                other = package_of(name)
                if other != me:
                    graph[me].add(other)
            elif name.split(".")[0] == "dagster":
                graph[me].add("<dagster>")
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_no_import_cycles_between_packages():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or [])


@pytest.mark.parametrize(
    "bottom, allowed",
    [
        ("errors", set()),
        ("interrupts", set()),
        ("offloop", set()),
        ("registry", {"errors"}),
        ("model", {"errors", "registry"}),
        ("config", {"errors", "model", "registry"}),
        ("loader", {"errors", "interrupts", "lazy", "model"}),
    ],
)
def test_bottom_layers_import_only_what_is_below_them(bottom, allowed):
    assert import_graph()[bottom] <= allowed


# Bottom layer first, as docs/layout.md lists them: each imports only packages before it.
LAYERS = [
    "errors",
    "interrupts",
    "lazy",
    "registry",
    "offloop",
    "files",
    "model",
    "pricing",
    "spend",
    "config",
    "traces",
    "backends",
    "connectors",
    "replay",
    "judges",
    "stores",
    "analysis",
    "loader",
    "capabilities",
    "engine",
    "reporters",
    "session",
    "pipeline",
    "cli",
    "sdk",
    "__init__",
    "__main__",
]


def test_every_package_imports_only_layers_below_it():
    graph = import_graph()
    assert set(graph) <= set(LAYERS), f"packages missing from LAYERS: {sorted(set(graph) - set(LAYERS))}"
    upward = {
        pkg: sorted(d for d in deps if d in LAYERS and LAYERS.index(d) > LAYERS.index(pkg))
        for pkg, deps in graph.items()
    }
    assert {pkg: deps for pkg, deps in upward.items() if deps} == {}


def test_sdk_is_the_top_layer_and_nothing_inside_imports_it():
    users = sorted(pkg for pkg, deps in import_graph().items() if "sdk" in deps and pkg != "__init__")
    assert users == []


def test_the_library_never_imports_dagster():
    assert [pkg for pkg, deps in import_graph().items() if "<dagster>" in deps] == []


def test_loading_tests_leaves_no_eval_module_behind(tmp_path):
    from agent_health import load_tests

    (tmp_path / "a.eval.py").write_text("from agent_health import test\n@test('t')\ndef t():\n    pass\n")
    before = {m for m in sys.modules if m.startswith("agent_health_evals")}
    for _ in range(3):
        loaded = load_tests([tmp_path])
        assert [t.case.name for t in loaded.tests] == ["t"]
    assert {m for m in sys.modules if m.startswith("agent_health_evals")} == before


def test_the_dagster_layer_enters_the_library_only_through_pipeline_and_errors():
    """The code location maps what `agent_health.pipeline` computes to Dagster objects; every other
    part of the library is reached through that one facade, so the library can change behind it."""
    dagster_layer = LIB.parent / "agent_health_dagster"
    allowed = {"agent_health.pipeline", "agent_health.errors"}
    found = {}
    for path in dagster_layer.rglob("*.py"):
        for name in imported_modules(path):
            if (name == "agent_health" or name.startswith("agent_health.")) and name not in allowed:
                found.setdefault(str(path.relative_to(LIB.parent)), []).append(name)
    assert found == {}


def test_readme_layout_lists_the_library_in_layer_order():
    """docs/layout.md names the library's parts bottom layer first, as LAYERS does."""
    layout = (LIB.parent / "docs" / "layout.md").read_text()
    block = layout.split("```", 2)[1]
    listed = [
        line.split()[0].rstrip("/").removesuffix(".py")
        for line in block.splitlines()
        if line.startswith("  ") and not line.startswith("   ")
    ]
    package_layers = [p for p in LAYERS if p not in ("__init__", "__main__")]
    assert [p for p in listed if p in LAYERS] == package_layers
    on_disk = {p.name.removesuffix(".py") for p in LIB.iterdir() if not p.name.startswith(("_", "."))}
    assert set(listed) == on_disk - {"py.typed"}, "docs/layout.md lists parts that do not exist, or misses some"


def test_every_package_declares_its_public_surface():
    """Each package's `__init__` lists what it offers in an explicit `__all__` (CONTRIBUTING.md):
    what is not listed is implementation, free to change."""
    missing = []
    for init in [*LIB.rglob("__init__.py"), *(LIB.parent / "agent_health_dagster").rglob("__init__.py")]:
        if "schemas" in init.parts or "templates" in init.parts:
            continue
        tree = ast.parse(init.read_text(), str(init))
        names = {
            t.id
            for node in tree.body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)
        }
        if "__all__" not in names:
            missing.append(str(init.relative_to(LIB.parent)))
    assert missing == []
