"""The persistent judge cache: content-addressed, survives processes, safe under concurrent writers."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agent_health.config.model import JudgeSettings
from agent_health.errors import ConfigError
from agent_health.judges.cache import LocalJudgeCache
from agent_health.judges.service import JudgeService

from .helpers import make_request, make_run, openai_settings

ROOT = Path(__file__).resolve().parents[2]


def judge_all(server, state: Path, requests, no_cache=False, **kw):
    async def main():
        service = JudgeService.from_settings(
            JudgeSettings(**openai_settings(server, **kw)), state_path=state, no_cache=no_cache
        )
        try:
            return [await service.judge(r) for r in requests]
        finally:
            await service.aclose()

    return asyncio.run(main())


def test_hit_makes_no_call_and_any_content_change_misses(openai_server, tmp_path):
    (first,) = judge_all(openai_server, tmp_path, [make_request()])
    assert not first.cached and first.usage.total_tokens == 120 and len(openai_server.posts()) == 1

    # a new service (as after a restart), same content, a different run id and call ids: a hit
    (hit,) = judge_all(openai_server, tmp_path, [make_request(run=make_run(run_id="run-2"), test_id="other::t")])
    assert hit.cached and hit.passed == first.passed and hit.score == first.score
    assert hit.reasoning == first.reasoning and hit.usage.total_tokens == 0  # costs nothing now
    assert hit.details["cached_usage"]["total_tokens"] == 120
    assert len(openai_server.posts()) == 1

    observed = make_request().model_copy(update={"role": "observe"})
    (obs,) = judge_all(openai_server, tmp_path, [observed])
    assert obs.cached and obs.role == "observe"  # the role is the caller's, not the stored one

    misses = [
        make_request(criteria="identifies the database as the root cause"),  # criteria
        make_request(model="openai:other-model"),  # model
        make_request(run=make_run(tool_result="ERROR disk full on db-primary")),  # trajectory
        make_request(run=make_run(output="The payment service is fine.")),  # output
        make_request(context=("output",)),  # context selection
    ]
    verdicts = judge_all(openai_server, tmp_path, misses)
    assert [v.cached for v in verdicts] == [False] * 5
    assert len(openai_server.posts()) == 6
    assert openai_server.posts()[2].json["model"] == "other-model"

    # all of them are now stored: the same five again make no call
    assert all(v.cached for v in judge_all(openai_server, tmp_path, misses))
    assert len(openai_server.posts()) == 6


def test_no_cache_bypasses_reads_and_writes(openai_server, tmp_path):
    judge_all(openai_server, tmp_path, [make_request()])
    (v,) = judge_all(openai_server, tmp_path, [make_request()], no_cache=True)
    assert not v.cached and len(openai_server.posts()) == 2
    judge_all(openai_server, tmp_path, [make_request(criteria="something new")], no_cache=True)
    (v,) = judge_all(openai_server, tmp_path, [make_request(criteria="something new")])
    assert not v.cached  # --no-cache stored nothing


def test_errored_verdicts_are_not_cached(openai_server, tmp_path):
    openai_server.script.append((500, {}, {"error": "boom"}))
    (v,) = judge_all(openai_server, tmp_path, [make_request()])
    assert v.errored
    (v,) = judge_all(openai_server, tmp_path, [make_request()])
    assert not v.errored and not v.cached and len(openai_server.posts()) == 2


def test_unusable_cache_file_is_a_clear_error(tmp_path, openai_server):
    (tmp_path / "judge_cache.sqlite").write_text("this is not a database" * 100)
    with pytest.raises(ConfigError, match=r"judge cache .*judge_cache.sqlite.*--no-cache"):
        JudgeService.from_settings(JudgeSettings(**openai_settings(openai_server)), state_path=tmp_path)


EVAL_FILE = """
from agent_health import test

@test("payment outage", prompt="Diagnose why the payment service is failing.")
async def payment(agent, judge):
    result = await agent.run()
    await judge(result, "identifies that the payment service cannot reach its database")
    await judge.observe(result, "the answer is concise")

@test("checkout latency", prompt="Checkout is slow, find out why.")
async def latency(agent, judge):
    result = await agent.run()
    await judge(result, {"criteria": "names the slow dependency", "context": ["output"]})

@test("no agent")
def plain(judge):
    judge("the sky is blue", "states a color")
"""

CONFIG_FILE = """
import os
from agent_health import define_config

config = define_config(
    judge={"provider": "openai", "model": "judge-model", "settings": {"base_url": os.environ["JUDGE_URL"]}},
    state_dir="state",
    prices={"judge-model": (1.0, 2.0)},
)
"""

RUNNER = """
import json, sys
from agent_health import load_config, load_tests, run_tests
config = load_config(sys.argv[1])
loaded = load_tests([sys.argv[2]])
assert not loaded.errors, loaded.errors
results = run_tests(loaded.tests, config, "demo@v2", no_cache="--no-cache" in sys.argv)
print(json.dumps([{"id": r.test_id, "status": r.status, "error": r.error,
                   "cached": [s.cached for s in r.signals if s.kind == "judge"],
                   "judge_tokens": r.judge_usage.total_tokens, "agent_tokens": r.usage.total_tokens,
                   "cost": r.cost_usd} for r in sorted(results, key=lambda r: r.test_id)]))
"""


def run_suite(project: Path, url: str, *extra: str) -> list[dict]:
    env = {**os.environ, "JUDGE_URL": url + "/v1", "PYTHONPATH": str(ROOT)}
    env.pop("AGENT_HEALTH_NO_CACHE", None)
    out = subprocess.run(
        [
            sys.executable,
            str(project / "runner.py"),
            str(project / "agent_health_config.py"),
            str(project / "evals"),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def project(tmp_path):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "judged.eval.py").write_text(EVAL_FILE)
    (tmp_path / "agent_health_config.py").write_text(CONFIG_FILE)
    (tmp_path / "runner.py").write_text(RUNNER)
    return tmp_path


def test_second_run_in_a_new_process_makes_zero_provider_calls(openai_server, project):
    first = run_suite(project, openai_server.url)
    calls = len(openai_server.posts())
    assert calls == 4 and all(r["status"] == "passed" for r in first), first
    assert all(c is False for r in first for c in r["cached"])
    assert all(r["judge_tokens"] > 0 for r in first)
    assert (project / "state" / "judge_cache.sqlite").is_file()

    second = run_suite(project, openai_server.url)
    assert len(openai_server.posts()) == calls  # not one provider call
    assert [r["status"] for r in second] == [r["status"] for r in first]
    assert all(c is True for r in second for c in r["cached"])
    assert all(r["judge_tokens"] == 0 for r in second)
    assert [r["agent_tokens"] for r in second] == [r["agent_tokens"] for r in first]  # counted apart

    run_suite(project, openai_server.url, "--no-cache")
    assert len(openai_server.posts()) == 2 * calls


WRITER = """
import sys, time, json
from pathlib import Path
from agent_health.judges.cache import LocalJudgeCache
path, who, start = sys.argv[1], sys.argv[2], Path(sys.argv[3])
cache = LocalJudgeCache(path)
while not start.exists():
    time.sleep(0.005)
for i in range(300):
    cache.put(f"shared-{i}", "verdict", {"i": i, "text": "x" * 500})
    cache.put(f"{who}-{i}", "verdict", {"i": i, "who": who, "text": "y" * 500})
    assert cache.get(f"shared-{i}")["i"] == i
cache.close()
print("done")
"""


def test_two_processes_writing_at_once_corrupt_nothing(tmp_path):
    path, start = tmp_path / "cache.sqlite", tmp_path / "go"
    (tmp_path / "writer.py").write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "writer.py"), str(path), who, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for who in "ab"
    ]
    import time

    time.sleep(0.5)  # both have opened the cache
    start.touch()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "done", err
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    rows = dict(db.execute("SELECT key, value FROM judge_cache").fetchall())
    db.close()
    assert len(rows) == 900
    for i in range(300):
        assert json.loads(rows[f"shared-{i}"])["i"] == i
        assert json.loads(rows[f"a-{i}"]) == {"i": i, "who": "a", "text": "y" * 500}
        assert json.loads(rows[f"b-{i}"])["who"] == "b"
    cache = LocalJudgeCache(path)
    assert len(cache) == 900 and cache.get("a-7")["i"] == 7
    cache.close()


AGENTIC_EVAL = """
from agent_health import test

@test("payment outage", prompt="Diagnose why the payment service is failing.")
async def payment(agent, judge):
    result = await agent.run()
    await judge(result, {"criteria": "finds the unreachable database in the traces", "tools": ["trace_query"]})
"""


def test_an_agentic_judge_of_a_deterministic_agent_hits_the_cache_on_a_fresh_run(openai_server, project):
    """The cache key of an agentic judge covers what its tools can reach, without the run's span
    ids, trace ids, per-run attribute ids or clock readings: a fresh `agent-health run` of a
    deterministic agent that repeats its trajectory (and so its spans) asks the judge nothing
    (RFC 4.7.1; before, its spans' start/end times and run id made every run a miss)."""
    from tests.conftest import run_cli

    (project / "evals" / "judged.eval.py").write_text(AGENTIC_EVAL)
    env = {"JUDGE_URL": openai_server.url + "/v1"}

    def fresh_run(n: int) -> list[bool]:
        p = run_cli("run", "evals", "--agent", "demo@v2", "--reporter", f"json=r{n}.json", cwd=project, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        (result,) = json.loads((project / f"r{n}.json").read_text())["results"]
        return [s["cached"] for s in result["signals"] if s["kind"] == "judge"]

    assert fresh_run(1) == [False]
    calls = len(openai_server.posts())
    assert calls >= 1
    assert fresh_run(2) == [True]
    assert len(openai_server.posts()) == calls  # a fresh run: not one judge request
