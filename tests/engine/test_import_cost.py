"""Import cost: `import agent_health` loads nothing until a name is used, every public name still
resolves, and `agent-health run` on Python eval files never imports what only other commands,
other reporters or data files need."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import agent_health

from ..conftest import ROOT


def python(code: str, cwd=ROOT) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def test_importing_the_package_loads_no_submodule_and_no_pydantic():
    code = "import sys, json, agent_health; print(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(python(code).stdout)
    # agent_health.lazy reads the public names from the package's stub
    assert [m for m in loaded if m.startswith(("agent_health", "pydantic"))] == ["agent_health", "agent_health.lazy"]


def test_every_public_name_resolves_to_its_defining_object():
    import importlib

    for name in agent_health.__all__:
        value = getattr(agent_health, name)
        if name in agent_health._LAZY:
            assert value is getattr(importlib.import_module(agent_health._LAZY[name]), name), name
    assert set(agent_health.__all__) <= set(dir(agent_health))
    assert set(agent_health.__all__) - {"__version__", "agent"} <= set(agent_health._LAZY)
    assert agent_health.agent is agent_health.agent  # one proxy, made once
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        agent_health.not_a_name
    code = "import json; from agent_health import *; print(json.dumps(sorted(k for k in dir() if k[0] != '_')))"
    star = json.loads(python(code).stdout)
    assert set(star) >= set(agent_health.__all__) - {"__version__"}


NOT_FOR_A_RUN = [
    "yaml",  # data files only
    "agent_health.loader.data",
    "agent_health.loader.formats",
    "agent_health.reporters.html",  # reporters that were not asked for
    "agent_health.reporters.junit",
    "agent_health.cli.compare",  # other commands
    "agent_health.cli.report",
    "agent_health.cli.schema",
    "agent_health.cli.rejudge",
    "agent_health.session.rejudge",
    "agent_health.analysis.frames",
    "pandas",
    "json_repair",  # judge answers that are not JSON only
    "agent_health.stores.s3",  # stores that were not chosen
    "agent_health.stores.opensearch",
    "agent_health.backends.s3",  # the shared backends behind them, and the judge cache's and recordings'
    "agent_health.backends.opensearch",
    "agent_health.traces.opensearch",  # trace sources that were not configured
    "agent_health.stores.summary",  # what rollups read; a run only writes
    "numpy",  # third-party libraries only some calls need, deferred where they are used (agent_health.lazy)
    "jsonschema",  # to_match_schema with a JSON schema
    "genai_prices",  # a model no price table names
    "boto3",
    "botocore",
    "opensearchpy",
    "jinja2",
]

RUN_AND_LIST_MODULES = """
import atexit, json, runpy, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["agent-health", "run", "evals"]
runpy.run_module("agent_health", run_name="__main__")
"""


def test_a_cli_run_of_python_eval_files_imports_only_what_it_needs(write_eval, tmp_path):
    write_eval(
        "one.eval.py", "from agent_health import test, expect\n@test('one')\ndef one():\n    expect(1).to_equal(1)\n"
    )
    out = python(RUN_AND_LIST_MODULES, cwd=tmp_path)
    modules = set(json.loads(out.stderr.strip().splitlines()[-1]))
    assert "agent_health.session.run" in modules and "agent_health.stores.local" in modules  # it did run and store
    assert sorted(modules & set(NOT_FOR_A_RUN)) == []


@pytest.mark.parametrize(
    "package",
    [
        "agent_health.analysis",
        "agent_health.backends",
        "agent_health.connectors",
        "agent_health.judges",
        "agent_health.reporters",
        "agent_health.session",
        "agent_health.stores",
    ],
)
def test_names_a_package_loads_on_first_use_resolve_to_their_defining_objects(package):
    import importlib

    code = f"import json, sys, {package} as p; print(json.dumps(sorted(sys.modules)))"
    loaded = set(json.loads(python(code).stdout))
    mod = importlib.import_module(package)
    lazy = mod._LAZY
    assert lazy and set(lazy) <= set(mod.__all__)
    for name, module in lazy.items():
        assert module not in loaded, f"importing {package} imported {module}"
        assert getattr(mod, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'not_a_name'"):
        mod.not_a_name


def test_a_deferred_module_is_imported_at_its_first_attribute_lookup():
    code = """
import json, sys
from agent_health.lazy import deferred
ids = deferred("agent_health.loader.ids")
before = "agent_health.loader.ids" in sys.modules
slug = ids.slug
import agent_health.loader.ids as real
missing = deferred("agent_health.no_such_module")
try:
    missing.anything
    error = None
except ModuleNotFoundError as exc:
    error = exc.name
print(json.dumps([before, "agent_health.loader.ids" in sys.modules, slug is real.slug, error]))
"""
    assert json.loads(python(code).stdout) == [False, True, True, "agent_health.no_such_module"]


def test_listing_the_commands_loads_no_run_machinery():
    code = """
import contextlib, io, json, sys
from agent_health.cli.main import cli
with contextlib.redirect_stdout(io.StringIO()) as out:
    cli.main(["--help"], prog_name="agent-health", standalone_mode=False)
print(json.dumps({"help": out.getvalue(), "modules": sorted(sys.modules)}))
"""
    seen = json.loads(python(code).stdout)
    assert "compare" in seen["help"] and "run" in seen["help"]  # every command was listed
    heavy = ("agent_health.session", "agent_health.stores", "agent_health.engine", "agent_health.analysis.compare")
    assert [m for m in seen["modules"] if m.startswith(heavy) or m.split(".")[0] in ("rich", "numpy", "jinja2")] == []
