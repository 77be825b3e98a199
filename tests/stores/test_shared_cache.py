"""The judge cache and replay recordings on a shared store (S3, OpenSearch): two workers with their
own state folders, as on two machines, share verdicts and recordings through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent_health.judges.cache import LocalJudgeCache, OpenSearchJudgeCache, S3JudgeCache, open_judge_cache
from agent_health.model import StoreSettings
from agent_health.replay.store import LocalRecordingStore, open_recordings
from tests.conftest import ROOT
from tests.judges.helpers import ScriptedServer, chat, verdict_json

EVAL_FILE = """
from agent_health import test

@test("payment outage", prompt="Diagnose why the payment service is failing.")
async def payment(agent, judge):
    result = await agent.run()
    await judge(result, "identifies that the payment service cannot reach its database")

@test("checkout latency", prompt="Checkout is slow, find out why.")
async def latency(agent, judge):
    result = await agent.run()
    await judge(result, {"criteria": "names the slow dependency", "context": ["output"]})
"""

CONFIG_FILE = """
import json, os
from agent_health import define_config

config = define_config(
    judge={"provider": "openai", "model": "judge-model", "settings": {"base_url": os.environ["JUDGE_URL"]}},
    store=json.loads(os.environ["STORE_SETTINGS"]),
    state_dir="state",
)
"""

RUNNER = """
import json, sys
from agent_health import load_config, load_tests, run_tests
config = load_config(sys.argv[1])
loaded = load_tests([sys.argv[2]])
assert not loaded.errors, loaded.errors
results = run_tests(loaded.tests, config, "demo@v2", replay=sys.argv[3])
print(json.dumps([{"id": r.test_id, "status": r.status, "error": r.error,
                   "cached": [s.cached for s in r.signals if s.kind == "judge"],
                   "replayed": bool(r.run and r.run.replayed), "output": r.run.output if r.run else None}
                  for r in sorted(results, key=lambda r: r.test_id)]))
"""


def worker(tmp_path: Path, name: str) -> Path:
    """A worker's own project folder (its own state folder), with the same eval file."""
    project = tmp_path / name
    (project / "evals").mkdir(parents=True)
    (project / "evals" / "judged.eval.py").write_text(EVAL_FILE)
    (project / "agent_health_config.py").write_text(CONFIG_FILE)
    (project / "runner.py").write_text(RUNNER)
    return project


def run_worker(project: Path, judge_url: str, store: StoreSettings, replay: str = "off") -> list[dict]:
    env = {
        **os.environ,
        "JUDGE_URL": judge_url + "/v1",
        "STORE_SETTINGS": store.model_dump_json(),
        "PYTHONPATH": str(ROOT),
    }
    for name in ("AGENT_HEALTH_NO_CACHE", "AGENT_HEALTH_REPLAY", "AGENT_HEALTH_CONFIG"):
        env.pop(name, None)
    out = subprocess.run(
        [
            sys.executable,
            str(project / "runner.py"),
            str(project / "agent_health_config.py"),
            str(project / "evals"),
            replay,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def judge_server():
    server = ScriptedServer()
    server.default = lambda r: chat(verdict_json())
    yield server
    server.close()


def test_a_second_worker_hits_the_first_workers_verdicts(shared_settings, judge_server, tmp_path):
    first = run_worker(worker(tmp_path, "machine-a"), judge_server.url, shared_settings)
    calls = len(judge_server.posts())
    assert calls == 2 and all(r["status"] == "passed" for r in first), first
    assert all(c is False for r in first for c in r["cached"])

    second = run_worker(worker(tmp_path, "machine-b"), judge_server.url, shared_settings)
    assert len(judge_server.posts()) == calls  # not one provider call on the other machine
    assert all(c is True for r in second for c in r["cached"]), second
    assert [r["status"] for r in second] == [r["status"] for r in first]
    for name in ("machine-a", "machine-b"):  # nothing went to a local SQLite cache
        assert not (tmp_path / name / "state" / "judge_cache.sqlite").exists()


def test_a_second_worker_replays_the_first_workers_recordings(shared_settings, judge_server, tmp_path):
    recorded = run_worker(worker(tmp_path, "machine-a"), judge_server.url, shared_settings, replay="auto")
    assert not any(r["replayed"] for r in recorded)
    replayed = run_worker(worker(tmp_path, "machine-b"), judge_server.url, shared_settings, replay="strict")
    assert all(r["replayed"] for r in replayed), replayed  # strict: a missing recording would error
    assert [r["output"] for r in replayed] == [r["output"] for r in recorded]
    assert not (tmp_path / "machine-b" / "state" / "recordings").exists()


def test_shared_cache_writes_are_conditional_first_writer_wins(shared_settings):
    cache = open_judge_cache(shared_settings, "unused.sqlite")
    assert isinstance(cache, S3JudgeCache if shared_settings.type == "s3" else OpenSearchJudgeCache)
    assert cache.get("k" * 64) is None and cache.misses == 1

    def write(who: str) -> None:
        open_judge_cache(shared_settings, "unused.sqlite").put("k" * 64, "verdict", {"who": who})

    threads = [threading.Thread(target=write, args=(w,)) for w in ("a", "b", "c", "d")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winner = cache.get("k" * 64)
    assert winner is not None and winner["who"] in "abcd" and cache.hits == 1
    cache.put("k" * 64, "verdict", {"who": "late"})  # an equal verdict arriving later changes nothing
    assert cache.get("k" * 64) == winner
    assert len(cache) == 1


def test_local_stores_and_shared_false_keep_the_cache_and_recordings_local(tmp_path, shared_settings):
    off = StoreSettings(type=shared_settings.type, settings={**shared_settings.settings, "shared": False})
    for settings in (None, StoreSettings(), off):
        cache = open_judge_cache(settings, tmp_path / "c.sqlite")
        assert type(cache) is LocalJudgeCache
        cache.close()
        assert type(open_recordings(settings, tmp_path / "rec")) is LocalRecordingStore
