"""`agent-health run --only missing|failed|changed`: against the store, a run sends the agent
exactly the tests that need a run (asserted on the prompts a real HTTP agent on 127.0.0.1 received
and on the store), leaves every other stored result as it was, and says how many it skipped."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_health import define_config, load_tests, run_evaluation
from agent_health.errors import ConfigError
from agent_health.session import build_settings
from agent_health.stores import LocalResultStore, ResultKey
from tests.support import LocalHTTPServer, QuietHandler
from tests.support.cli import cli_in_process

from ..conftest import ROOT

EVAL = """
from agent_health import expect, fixture, test

@fixture
def ticket():
    return "T-1"

@test("one", prompt="prompt one")
async def one(agent, ticket):
    expect((await agent.run()).output).to_contain("ok")

@test("two", prompt="prompt two")
async def two(agent, ticket):
    expect((await agent.run()).output).to_contain("ok")

@test("three", prompt="prompt three")
async def three(agent):
    expect((await agent.run()).output).to_contain("ok")

@test("four", prompt="prompt four fails")
async def four(agent):
    expect((await agent.run()).output).to_contain("ok")
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{{
        "key": "shop",
        "connector": "http",
        "settings": {{"endpoint": "{url}/agent", "timeout_s": 5}},
        "versions": {{"v1": {{"body": {{"temperature": {temperature}}}}}, "v2": {{}}}},
        "default_version": "v1",
    }}],
    default_agent="shop@v1",
    judge={judge},
)
"""

ALL = {"prompt one", "prompt two", "prompt three", "prompt four fails"}


class _Agent(QuietHandler):
    """A REST agent: answers "ok" except to a prompt that says "fails"; records every prompt."""

    server: AgentServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        prompt = body.get("prompt", "")
        with self.server.lock:
            self.server.prompts.append(prompt)
        data = json.dumps({"response": "nope" if "fails" in prompt else f"ok: {prompt}"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class AgentServer(LocalHTTPServer):
    def __init__(self) -> None:
        super().__init__(_Agent)
        self.prompts: list[str] = []
        self.lock = threading.Lock()

    def take(self) -> list[str]:
        """The prompts received since the last call."""
        with self.lock:
            out, self.prompts = self.prompts, []
        return out


@pytest.fixture
def agent():
    with AgentServer() as srv:
        yield srv


class Project:
    def __init__(self, root: Path, agent: AgentServer):
        self.root, self.agent = root, agent
        self.eval_file = root / "evals" / "shop.eval.py"
        self.eval_file.parent.mkdir(parents=True)
        self.eval_file.write_text(textwrap.dedent(EVAL).lstrip())
        self.configure()
        self.store = LocalResultStore(root / ".agent_health" / "results")

    def configure(self, temperature: float = 0.1, judge: dict[str, Any] | None = None) -> None:
        text = CONFIG.format(url=self.agent.url, temperature=temperature, judge=repr(judge or {}))
        (self.root / "agent_health_config.py").write_text(textwrap.dedent(text))

    def run(self, *args: str, code: int | None = None, env: dict[str, str] | None = None) -> str:
        """`agent-health run evals --no-judge ARGS`; its stderr and stdout."""
        p = cli_in_process("run", "evals", "--no-judge", *args, cwd=self.root, env=env)
        out = p.stdout + p.stderr
        assert "Traceback" not in out, out
        if code is not None:
            assert p.returncode == code, out
        return out

    def run_ids(self, agent: str = "shop@v1") -> dict[str, str | None]:
        """Test name -> the run that stored its result."""
        return {r.test_id.rsplit("::", 1)[-1]: r.eval_run_id for r in self.store.load(agent)}


@pytest.fixture
def project(tmp_path, agent) -> Project:
    return Project(tmp_path, agent)


def skipped_line(out: str) -> int | None:
    m = re.search(r"^(\d+) skipped as up to date", out, re.M)
    return int(m.group(1)) if m else None


def test_only_missing_resumes_a_run_without_repeating_what_is_stored(project):
    project.run(code=1)  # "four" fails
    assert set(project.agent.take()) == ALL
    first = project.run_ids()
    assert set(first) == {"one", "two", "three", "four"}
    for key in project.store.list("shop@v1"):  # as if the run had stopped before these two
        if key.test_id.endswith(("two", "three")):
            assert project.store.delete(key)

    out = project.run("--only", "missing", code=0)
    assert sorted(project.agent.take()) == ["prompt three", "prompt two"]
    assert "Running 2 test(s) against shop@v1" in out and skipped_line(out) == 2
    now = project.run_ids()
    assert set(now) == {"one", "two", "three", "four"}
    assert now["one"] == first["one"] and now["four"] == first["four"]  # nothing stored was repeated
    assert now["two"] == now["three"] != first["one"]

    # everything stored: nothing runs, nothing fails, and the summary says why
    out = project.run("--only", "missing", code=0)
    assert project.agent.take() == [] and skipped_line(out) == 4
    (last, *_) = project.store.list_runs()
    assert last.settings.only == ("missing",) and last.tests == 0
    assert [(s.agent, s.total, s.skipped) for s in last.summaries] == [("shop@v1", 0, 4)]


def test_only_missing_after_a_partial_run_and_only_failed(project):
    project.run("--grep", "one|four", code=1)  # a partial run: "four" fails
    assert sorted(project.agent.take()) == ["prompt four fails", "prompt one"]

    # --list shows what --only would run, runs nothing and stores nothing
    listed = project.run("--only", "missing", "--list", code=0)
    assert "shop@v1: 2 skipped as up to date" in listed and "2 test(s) in 1 file(s)" in listed
    assert re.findall(r"^shop::(\w+)", listed, re.M) == ["two", "three"]
    assert project.agent.take() == [] and len(project.store.list_runs()) == 1

    out = project.run("--only", "missing", code=0)
    assert sorted(project.agent.take()) == ["prompt three", "prompt two"] and skipped_line(out) == 2
    before = project.run_ids()

    out = project.run("--only", "failed", code=1)  # it still fails
    assert project.agent.take() == ["prompt four fails"] and skipped_line(out) == 3
    after = project.run_ids()
    assert after["four"] != before["four"]
    assert {k: v for k, v in after.items() if k != "four"} == {k: v for k, v in before.items() if k != "four"}


def test_only_changed_reruns_exactly_the_tests_that_use_an_edited_fixture(project):
    project.run(code=1)
    project.agent.take()
    before = project.run_ids()
    project.eval_file.write_text(project.eval_file.read_text() + "\n# a comment changes no test\n")
    out = project.run("--only", "changed", code=0)
    assert project.agent.take() == [] and skipped_line(out) == 4

    project.eval_file.write_text(project.eval_file.read_text().replace('return "T-1"', 'return "T-2"'))
    out = project.run("--only", "changed", code=0)
    assert sorted(project.agent.take()) == ["prompt one", "prompt two"] and skipped_line(out) == 2
    after = project.run_ids()
    assert after["three"] == before["three"] and after["four"] == before["four"]
    assert after["one"] != before["one"] and after["two"] != before["two"]


def test_only_changed_reruns_every_test_of_a_version_whose_settings_or_judge_changed(project):
    project.run("--agent", "shop@v1", "--agent", "shop@v2", code=1)
    assert len(project.agent.take()) == 8

    project.configure(temperature=0.7)  # shop@v1's settings only
    out = project.run("--agent", "shop@v1", "--agent", "shop@v2", "--only", "changed", code=1)
    assert sorted(project.agent.take()) == sorted(ALL) and skipped_line(out) == 4
    assert {s.agent: (s.total, s.skipped) for s in project.store.list_runs()[0].summaries} == {
        "shop@v1": (4, 0),
        "shop@v2": (0, 4),
    }
    out = project.run("--agent", "shop@v1", "--agent", "shop@v2", "--only", "changed", code=0)
    assert project.agent.take() == [] and skipped_line(out) == 8

    project.configure(temperature=0.7, judge={"max_output_chars": 5000})  # both versions' judge
    out = project.run("--agent", "shop@v1", "--agent", "shop@v2", "--only", "changed", code=1)
    assert len(project.agent.take()) == 8 and skipped_line(out) is None


def test_repeated_only_flags_are_a_union(project):
    project.run(code=1)
    project.agent.take()
    for key in project.store.list("shop@v1"):
        if key.test_id.endswith("::one"):
            project.store.delete(key)
    project.eval_file.write_text(project.eval_file.read_text().replace('"prompt three"', '"prompt three!"'))

    out = project.run("--only", "missing", "--only", "failed", "--only", "changed", code=1)
    assert sorted(project.agent.take()) == ["prompt four fails", "prompt one", "prompt three!"]
    assert skipped_line(out) == 1
    out = project.run("--only", "missing", "--only", "missing", code=0)  # nothing missing any more
    assert project.agent.take() == [] and skipped_line(out) == 4


def test_only_without_a_store_is_one_clear_error(project):
    out = project.run("--only", "missing", "--no-store", code=2)
    assert "--only compares with the stored results; it cannot be combined with --no-store" in out
    out = project.run("--only", "failed", code=2, env={"AGENT_HEALTH_STORE": "none"})
    assert "error: --only failed compares with the stored results, but this run stores nothing" in out
    out = project.run("--only", "stale", code=2)
    assert "'stale' is not one of 'missing', 'failed', 'changed'" in out
    assert project.agent.take() == [] and not project.store.list()


def test_the_python_api_takes_only_and_needs_a_store(tmp_path, write_eval):
    write_eval("a.eval.py", "from agent_health import test, expect\n\n@test('a')\ndef a():\n    expect(1).to_equal(1)")
    config = define_config(root=str(tmp_path))
    tests = load_tests([tmp_path / "evals"]).tests
    settings = build_settings(config, {"only": "missing", "store": "none"})
    assert settings.only == ("missing",)
    assert build_settings(config, {"only": ["failed", "missing", "failed"]}).only == ("failed", "missing")
    with pytest.raises(ConfigError, match="--only missing compares with the stored results"):
        asyncio.run(run_evaluation(tests, config, settings))
    with pytest.raises(ConfigError, match="only"):
        build_settings(config, {"only": ["stale"]})

    store = LocalResultStore(tmp_path / "results")
    first = asyncio.run(run_evaluation(tests, config, build_settings(config, {"only": "missing"}), store=store))
    assert first.stored == 1 and first.run.summaries[0].skipped == 0
    again = asyncio.run(run_evaluation(tests, config, build_settings(config, {"only": "missing"}), store=store))
    assert again.stored == 0 and again.run.summaries[0].skipped == 1 and again.all_passed
    assert store.get(ResultKey("demo@v2", tests[0].case.suite, tests[0].id)) is not None


def test_the_docs_example_runs_as_written(tmp_path):
    """docs/running.md's --only block, line by line through the real CLI on the demo suites: each
    exit code its comment states (`exits N`, else 0) and each `N skipped as up to date`."""
    text = (ROOT / "docs" / "running.md").read_text()
    section = text[text.index("## Running only what needs it") :]
    lines = re.search(r"```bash\n(.*?)```", section, re.S).group(1).splitlines()  # type: ignore[union-attr]
    shutil.copytree(ROOT / "evals", tmp_path / "evals")
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config()\n"
    )
    ran = []
    for line in lines:
        command, _, comment = line.partition("  #")
        words = shlex.split(command)
        assert words[0] == "agent-health", line
        p = cli_in_process(*words[1:], cwd=tmp_path)
        out = p.stdout + p.stderr
        m = re.search(r"exits (\d)", comment)
        assert p.returncode == (int(m.group(1)) if m else 0), f"{line!r}:\n{out}"
        m = re.search(r"(\d+) skipped as up to date", comment)
        assert skipped_line(out) == (int(m.group(1)) if m else None), f"{line!r}:\n{out}"
        ran.append(re.search(r"Running (\d+) test", out).group(1))  # type: ignore[union-attr]
    assert ran == ["8", "10", "0", "10", "18"]
