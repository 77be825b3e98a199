"""The project and its configuration are loaded once per process and reloaded only when their
files change: the resource does not re-execute the configuration on every call, and the sensor
does not re-import unchanged eval files every tick."""

from __future__ import annotations

import os

from agent_health.pipeline import Project

COUNTING_CONFIG = """
from pathlib import Path
counter = Path(__file__).with_name("loads.txt")
counter.write_text(str(int(counter.read_text()) + 1) if counter.exists() else "1")
from agent_health import define_config
config = define_config(concurrency={n})
"""

COUNTING_EVAL = """
from pathlib import Path
counter = Path(__file__).with_name("imports.txt")
counter.write_text(str(int(counter.read_text()) + 1) if counter.exists() else "1")
from agent_health import test, expect

@test("one")
def one():
    expect(1).to_equal(1)
"""


def bump(path):
    """Change a file so its stamp differs even within one clock tick."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_configuration_loads_once_until_its_file_changes(tmp_path):
    config = tmp_path / "agent_health_config.py"
    config.write_text(COUNTING_CONFIG.format(n=3))
    first = Project.load(str(config))
    assert Project.load(str(config)) is first and Project.load(str(config)) is first
    assert (tmp_path / "loads.txt").read_text() == "1"
    config.write_text(COUNTING_CONFIG.format(n=5))
    bump(config)
    second = Project.load(str(config))
    assert second is not first and second.config.concurrency == 5
    assert (tmp_path / "loads.txt").read_text() == "2"


def test_eval_files_are_imported_again_only_when_they_change(tmp_path):
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config()\n"
    )
    evals = tmp_path / "evals"
    evals.mkdir()
    one = evals / "one.eval.py"
    one.write_text(COUNTING_EVAL)
    (evals / "two.eval.py").write_text(COUNTING_EVAL.replace("imports.txt", "imports2.txt"))
    project = Project.load(str(tmp_path / "agent_health_config.py"))
    for _ in range(3):  # three sensor ticks
        loaded = project.load_all()
        assert len(loaded.tests) == 2
        assert project.load_suite("one").tests[0].id == "one::one"
    assert (evals / "imports.txt").read_text() == "1" and (evals / "imports2.txt").read_text() == "1"
    one.write_text(COUNTING_EVAL + "\n\n@test('two')\ndef two():\n    expect(2).to_equal(2)\n")
    bump(one)
    assert len(project.load_all().tests) == 3
    assert (evals / "imports.txt").read_text() == "2" and (evals / "imports2.txt").read_text() == "1"
