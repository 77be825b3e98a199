"""Artifacts had a cap per file (`max_artifact_bytes`, 1 MiB) but none per run: one subprocess
agent writing 200 files of 1 MB made a 196 MB run log, a 205 MB JSON report and a 205 MB HTML page,
and the CLI peaked at 1.18 GB. A run now stores at most ARTIFACTS_RUN_MAX characters of artifact
copies over all its results (docs/limits.md); past it an artifact keeps its name, size and hash,
says why its copy is missing, and the run ends with a warning counting them. The body of a test
still sees every copy its agent made."""

from __future__ import annotations

import json
import sys
import textwrap

import agent_health.engine.runner as runner
from agent_health import define_config, load_tests, run_tests
from agent_health.model import RunSettings
from agent_health.model.limits import ARTIFACTS_RUN_MAX
from tests.support.cli import cli_in_process

WRITER = """
import os

folder = os.environ["AGENT_HEALTH_ARTIFACTS_DIR"]
line = ("x" * 999 + "\\n").encode()
for i in range(20):
    with open(os.path.join(folder, f"part-{i:02}.txt"), "wb") as fh:
        fh.write(line * 1000)  # 1,000,000 bytes: under the 1 MiB cap of one artifact
print("wrote 20 files")
"""

CONFIG = f"""
from agent_health import define_config

config = define_config(
    agents=[{{"key": "writer", "connector": "subprocess", "settings": {{"command": [{sys.executable!r}, "writer.py"]}},
             "versions": {{"v1": {{}}}}}}],
    default_agent="writer@v1",
)
"""

SEES_EVERY_COPY = """
from agent_health import expect, test

for n in (1, 2):
    @test(f"writes {n}", prompt="Write the report files.")
    async def writes(agent):
        result = await agent.run()
        expect(sum(1 for a in result.artifacts if a.content)).to_equal(20)  # the body sees all 20
"""


def test_a_run_stores_artifact_copies_up_to_its_cap_and_says_what_it_left_out(tmp_path, evals):
    (tmp_path / "writer.py").write_text(textwrap.dedent(WRITER))
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    evals("writes.eval.py", SEES_EVERY_COPY)
    proc = cli_in_process(
        "run", "evals", "--no-judge", "--concurrency", "1", "--reporter", "json=report.json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    artifacts = [a for r in report["results"] for a in r["run"]["artifacts"]]
    copies = [a for a in artifacts if a["content"] is not None]
    left_out = [a for a in artifacts if a["content"] is None]
    assert len(artifacts) == 40 and len(copies) == ARTIFACTS_RUN_MAX // 1_000_000  # 33 of the 40 MB
    assert sum(len(a["content"]) for a in copies) <= ARTIFACTS_RUN_MAX
    for a in left_out:
        assert a["size"] == 1_000_000 and len(a["sha256"]) == 64 and "ARTIFACTS_RUN_MAX" in a["omitted"]
    warning = f"warning: {len(left_out)} artifact copy(ies) not stored: the run's artifact copies reached"
    assert warning in proc.stdout, proc.stdout
    assert report["warnings"] and report["warnings"][0].startswith(f"{len(left_out)} artifact copy(ies)")
    [log] = (tmp_path / ".agent_health" / "results" / "_runs").glob("*/results.jsonl")
    assert log.stat().st_size < ARTIFACTS_RUN_MAX + 2_000_000  # was 40 MB and more, growing with the agent
    assert (tmp_path / "report.json").stat().st_size < ARTIFACTS_RUN_MAX + 2_000_000


ANSWERS = """
def run(prompt):
    files = [{"name": f"notes-{i}.md", "media_type": "text/markdown", "content": "y" * 2000} for i in range(3)]
    return {"output": "done", "artifacts": files}
"""

THREE = "tests:\n" + "".join(f"  - name: case {i}\n    prompt: Write notes {i}.\n" for i in range(3))


def test_the_cap_holds_for_every_connector_and_over_epochs(tmp_path, evals, monkeypatch):
    """A python agent answering with artifacts (the REST form): the cap is the run's, over every
    result and every kept trial (here set to 10,000 characters, five copies of 2,000)."""
    monkeypatch.setattr(runner, "ARTIFACTS_RUN_MAX", 10_000)
    (tmp_path / "notes_agent.py").write_text(textwrap.dedent(ANSWERS))
    monkeypatch.syspath_prepend(str(tmp_path))
    config = define_config(
        root=str(tmp_path),
        agents=[{"key": "notes", "connector": "python", "settings": {"function": "notes_agent:run"},
                 "versions": {"v1": {}}}],
    )  # fmt: skip
    evals("notes.yaml", THREE)
    settings = RunSettings(epochs=2, store=None)
    results = run_tests(load_tests([tmp_path / "evals"]).tests, config, "notes@v1", settings)
    runs = {id(t.run): t.run for r in results for t in r.trials if t.run is not None}  # each trial's run
    assert len(runs) == 6 and all(r.run is not None and id(r.run) in runs for r in results)  # the last is one
    artifacts = [a for run in runs.values() for a in run.artifacts]
    assert sum(1 for a in artifacts if a.content is not None) == 5  # 10,000 characters: five copies of 2,000
    assert sum(1 for a in artifacts if a.omitted) == 13
