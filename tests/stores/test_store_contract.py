"""The result store contract, run against every store type on real services: local files, S3
(moto's server) and OpenSearch (the session's node). See tests/stores/conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agent_health.config import Config
from agent_health.config.secrets import REDACTED, scrub_secrets
from agent_health.errors import ConfigError, StoreError
from agent_health.model import EvalRun, RunSettings, StoreSettings
from agent_health.stores import ResultKey, ResultSummary, open_store
from tests.conftest import ROOT
from tests.stores.results import make_result
from tests.support.s3 import S3_ENV

WEIRD_ID = "dir/sub::name with spaces|pipe%25 & ü"


def test_put_then_get_round_trips_the_whole_result(store):
    r = make_result("rca::payments", labels=("category:RCA",))
    key = store.put(r)
    assert key == ResultKey("demo@v1", "rca", "rca::payments")
    assert store.get(key) == r
    assert store.get(ResultKey("demo@v1", "rca", "rca::other")) is None


def test_missing_keys_runs_and_deletes_are_none_empty_and_false(store):
    missing = ResultKey("demo@v9", "nope", "nope::t")
    assert store.get(missing) is None
    assert store.delete(missing) is False
    assert list(store.get_many([missing])) == []
    assert list(store.get_summaries([missing])) == []
    assert store.list() == []
    assert store.list(agent="demo@v9") == []
    assert store.get_run("20261201T000000-00000000") is None
    assert list(store.run_results("20261201T000000-00000000")) == []
    assert store.list_runs() == []


def test_list_filters_by_agent_and_suite_and_sorts_and_keeps_odd_ids(store):
    for agent, suite, tid in [
        ("demo@v2", "rca", "rca::b"),
        ("demo@v1", "rca", "rca::a"),
        ("demo@v1", "smoke", "smoke::x"),
        ("demo@v1", "rca", WEIRD_ID),
    ]:
        store.put(make_result(tid, agent=agent, suite=suite))
    assert store.list() == sorted(
        [
            ResultKey("demo@v1", "rca", "rca::a"),
            ResultKey("demo@v1", "rca", WEIRD_ID),
            ResultKey("demo@v1", "smoke", "smoke::x"),
            ResultKey("demo@v2", "rca", "rca::b"),
        ]
    )
    assert store.list(agent="demo@v1", suite="rca") == [
        ResultKey("demo@v1", "rca", WEIRD_ID),
        ResultKey("demo@v1", "rca", "rca::a"),
    ]
    assert store.list(suite="smoke") == [ResultKey("demo@v1", "smoke", "smoke::x")]
    assert store.get(ResultKey("demo@v1", "rca", WEIRD_ID)).test_id == WEIRD_ID
    assert store.delete(ResultKey("demo@v1", "rca", "rca::a")) is True
    assert ResultKey("demo@v1", "rca", "rca::a") not in store.list()


def test_a_rewrite_replaces_the_result_and_its_summary(store):
    keys = [store.put(make_result(f"rca::t{i:03d}", status="failed")) for i in range(80)]  # past the bulk threshold
    assert {s.status for s in store.get_summaries(keys)} == {"failed"}
    store.put(make_result("rca::t007", status="passed", cost_usd=0.5))
    store.put_many([make_result(f"rca::t{i:03d}", status="passed") for i in range(40, 50)])
    summaries = list(store.get_summaries(keys))
    assert [s.test_id for s in summaries] == [k.test_id for k in keys]  # in the order asked
    passed = {s.test_id for s in summaries if s.status == "passed"}
    assert passed == {"rca::t007"} | {f"rca::t{i:03d}" for i in range(40, 50)}
    assert next(s for s in summaries if s.test_id == "rca::t007").cost_usd == 0.5
    assert len(store.list()) == 80
    assert store.get(keys[7]).status == "passed"


def test_summaries_are_what_rollups_read_of_each_result_and_skip_missing_keys(store):
    results = [make_result(f"rca::s{i:03d}", status=("passed", "failed", "errored")[i % 3]) for i in range(70)]
    store.put_many(results)
    wanted = [ResultKey.of(r) for r in results[::2]] + [ResultKey("demo@v1", "rca", "rca::absent")]
    got = list(store.get_summaries(wanted))
    assert got == [ResultSummary.of(r) for r in results[::2]]
    assert [r.test_id for r in store.get_many(wanted[:3])] == [
        results[0].test_id,
        results[2].test_id,
        results[4].test_id,
    ]
    # a second read (S3: from its summary cache) gives the same figures
    assert list(store.get_summaries(wanted)) == got


def test_run_history_keeps_each_runs_results_in_order_and_counts_a_rewrite_once(store):
    first = EvalRun(
        id="20261201T000000-aaaa0001", transport="cli", started_at=1.0, settings=RunSettings(agents=("demo@v1",))
    )
    second = EvalRun(id="20261201T000001-aaaa0002", transport="dagster", started_at=2.0)
    store.put_run(first)
    store.put(make_result("rca::t1", status="failed", eval_run_id=first.id))
    store.put(make_result("rca::t2", eval_run_id=first.id))
    store.put(make_result("rca::t3", status="errored", eval_run_id=first.id))
    store.put(make_result("rca::t1", status="passed", eval_run_id=first.id))  # a retried step
    store.put_run(first.model_copy(update={"status": "finished", "finished_at": 3.0}))
    store.put_run(second)
    store.put(make_result("rca::t2", status="failed", eval_run_id=second.id))

    assert [(r.test_id, r.status) for r in store.run_results(first.id)] == [
        ("rca::t2", "passed"),
        ("rca::t3", "errored"),
        ("rca::t1", "passed"),
    ]
    assert [(r.test_id, r.status) for r in store.run_results(second.id)] == [("rca::t2", "failed")]
    assert store.get(ResultKey("demo@v1", "rca", "rca::t2")).status == "failed"  # the latest wins
    assert [r.id for r in store.list_runs()] == [second.id, first.id]  # newest first
    got = store.get_run(first.id)
    assert got.status == "finished" and got.settings.agents == ("demo@v1",)
    assert len(store.list()) == 3  # run history is not listed as results


def test_concurrent_writers_in_several_processes_lose_nothing(store, store_settings, tmp_path):
    run = EvalRun(id="20261201T000002-cccc0003", transport="dagster")
    store.put_run(run)
    workers, count = 3, 15
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.stores.writer",
                store_settings.model_dump_json(),
                str(tmp_path),
                str(w),
                str(count),
                run.id,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0 and out.strip() == "done", err[-2000:]
    keys = store.list(suite="race")
    assert len(keys) == workers * count + count
    for k in keys:
        r = store.get(k)
        assert r is not None and r.score in {float(w) for w in range(workers)}  # one writer's whole result
        if k.test_id.startswith("own::w"):
            assert r.score == float(k.test_id[len("own::w")])
    in_run = [r.test_id for r in store.run_results(run.id)]
    assert sorted(in_run) == sorted(k.test_id for k in keys)  # every key once


def test_credentials_never_reach_stored_data_or_messages(store, store_settings, stored_bytes, monkeypatch):
    password = "hunter2-store-password-77"
    monkeypatch.setenv("AH_TEST_STORE_PASSWORD", password)
    settings = dict(store_settings.settings)
    # An inline secret in the configuration is refused, naming the setting.
    for bad in (
        {"auth": {"type": "basic", "username": "u", "password": password}},
        {"aws_secret_access_key": "x"},
        {"url": f"http://u:{password}@127.0.0.1:9200"},
    ):
        with pytest.raises(ConfigError, match=r"store\.settings\.(auth\.password|aws_secret_access_key|url)") as info:
            open_store(Config(root="."), StoreSettings(type=store_settings.type, settings={**settings, **bad}))
        assert password not in str(info.value)
    if store_settings.type == "opensearch":  # credentials from the environment work (the node ignores them)
        settings["auth"] = {"type": "basic", "username": "u", "password_env": "AH_TEST_STORE_PASSWORD"}
    store = open_store(Config(root="."), StoreSettings(type=store_settings.type, settings=settings))
    run = EvalRun(settings=RunSettings(store=StoreSettings(type=store_settings.type, settings=settings)))
    store.put_run(run)
    store.put(make_result("rca::secret", eval_run_id=run.id))
    assert store.get(ResultKey("demo@v1", "rca", "rca::secret")) is not None
    blob = stored_bytes()
    assert blob and b"rca::secret" in blob
    for secret in (password, S3_ENV["AWS_SECRET_ACCESS_KEY"]):
        assert secret.encode() not in blob
        assert secret not in store.location
    assert S3_ENV["AWS_ACCESS_KEY_ID"].encode() not in blob


def test_an_unreachable_store_is_one_clear_error_naming_it(store_settings, tmp_path):
    if store_settings.type == "local":
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        settings = {"path": str(blocker / "results")}
    elif store_settings.type == "s3":
        settings = {**store_settings.settings, "bucket": "ah-no-such-bucket", "max_attempts": 1}
    else:
        settings = {"url": "http://127.0.0.1:9", "index": "ah-x", "timeout_s": 2, "max_retries": 0}
    store = open_store(Config(root=str(tmp_path)), StoreSettings(type=store_settings.type, settings=settings))
    with pytest.raises(StoreError) as info:
        store.put(make_result("rca::t"))
    message = str(info.value)
    assert ("ah-no-such-bucket" in message) or ("127.0.0.1:9" in message) or (str(blocker) in message)
    assert S3_ENV["AWS_SECRET_ACCESS_KEY"] not in message


def test_unknown_settings_values_name_the_setting():
    with pytest.raises(ConfigError, match=r"store\.settings\.bucket"):
        open_store(Config(root="."), StoreSettings(type="s3", settings={}))
    with pytest.raises(ConfigError, match=r"store\.settings\.index"):
        open_store(Config(root="."), StoreSettings(type="opensearch", settings={"index": "Bad*Index"}))
    with pytest.raises(ConfigError, match=r"store\.settings\.max_attempts"):
        open_store(Config(root="."), StoreSettings(type="s3", settings={"bucket": "b", "max_attempts": "many"}))


def test_the_run_manifest_round_trips(store):
    run = EvalRun(id="20261201T000003-dddd0004", transport="cli", agents=("demo@v1",), tests=3)
    store.put_run(run)
    assert store.get_run(run.id) == run
    assert json.loads(store.get_run(run.id).model_dump_json())["tests"] == 3


def test_local_store_settings_path_is_relative_to_the_project(tmp_path: Path):
    store = open_store(Config(root=str(tmp_path)), StoreSettings(type="local", settings={"path": "shared/results"}))
    assert store.location == str(tmp_path / "shared" / "results")


def test_store_credentials_join_the_process_scrub_set(shared_settings, monkeypatch):
    """The S3 secret key (from the AWS chain) and the OpenSearch password (from the environment)
    are registered when the store first connects, so they never reach results, reports or logs."""
    secret = f"store-credential-{uuid.uuid4().hex}"  # fresh: no other test can have registered it
    settings = dict(shared_settings.settings)
    if shared_settings.type == "s3":
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)  # moto accepts any key
    else:
        monkeypatch.setenv("AH_TEST_STORE_PASSWORD", secret)  # the test node ignores credentials
        settings["auth"] = {"type": "basic", "username": "u", "password_env": "AH_TEST_STORE_PASSWORD"}
    assert secret in scrub_secrets(f"echoed: {secret}")
    store = open_store(Config(root="."), StoreSettings(type=shared_settings.type, settings=settings))
    store.put(make_result("rca::credential"))
    assert store.get(ResultKey("demo@v1", "rca", "rca::credential")) is not None
    assert scrub_secrets(f"echoed: {secret}") == f"echoed: {REDACTED}"
