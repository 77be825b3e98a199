"""Scrubbing secrets never rewrites identifiers: with LocalStack's and MinIO's default credentials
(`test`/`test`, `minioadmin`/`minioadmin`) as the agent's token, the AWS keys and the store's
password, and suites and tests named with those words, every result is stored under its own keys
on the local, S3 (the suite's moto server) and OpenSearch (the suite's node) stores, the rollup
finds each one, the text keeps its words, and a value that is exactly the secret is still kept
out. A long random key is still scrubbed everywhere. The userinfo of a URL never reaches a result,
a message or a settings dump."""

from __future__ import annotations

import json
import secrets as random_secrets
import textwrap
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_health.analysis.rollup import load_summaries
from agent_health.config import Config
from agent_health.config.secrets import REDACTED, SecretSet
from agent_health.model import RunReport, RunResult, StoreSettings, TestResult
from agent_health.stores import open_store
from tests.faults.test_faults_secrets import every_artifact, leaks
from tests.support.cli import cli_in_process
from tests.support.net import free_port
from tests.support.s3 import all_objects, new_bucket

TALKER = """
def run(prompt, token):
    return {
        "output": f"The payment service cannot reach its database. This {WORD} run is about: {prompt}; key {token}.",
        "token": token,
    }
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{{
        "key": "talker",
        "connector": "python",
        "settings": {{"function": "talker:run", "kwargs": {{"token": {{"env": "FAULTS_AGENT_TOKEN"}}}}}},
        "versions": {{"v1": {{}}}},
    }}],
    default_agent="talker@v1",
    store={store!r},
)
"""

CODE_TEST = """
from agent_health import expect, test


@test("{word} keeps its words", prompt="Diagnose why the payment service is failing.")
async def keeps(agent):
    result = await agent.run()
    expect(result.output).to_contain("This {word} run is about")
"""

CREDENTIALS = {  # name -> (the word the names use, the secret)
    "localstack": ("test", "test"),
    "minio": ("minioadmin", "minioadmin"),
    "long-random": ("test", "rk-" + random_secrets.token_urlsafe(30)),
}


def store_settings(kind: str, word: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if kind == "local":
        return {"type": "local", "settings": {"path": str(tmp_path / "results" / word)}}
    if kind == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        return {"type": "s3", "settings": {"bucket": new_bucket(endpoint), "prefix": word, "endpoint_url": endpoint}}
    url = request.getfixturevalue("opensearch_url")
    auth = {"type": "basic", "username": word, "password_env": "FAULTS_STORE_PASSWORD"}
    return {"type": "opensearch", "settings": {"url": url, "index": f"{word}-{uuid.uuid4().hex[:8]}", "auth": auth}}


def stored_bytes(store: dict[str, Any]) -> tuple[list[str], bytes]:
    """(every key or document id the store holds, every byte it holds)."""
    s = store["settings"]
    if store["type"] == "local":
        files = [p for p in sorted(Path(s["path"]).rglob("*")) if p.is_file()]
        return [str(p.relative_to(s["path"])) for p in files], b"".join(p.read_bytes() for p in files)
    if store["type"] == "s3":
        objects = all_objects(s["endpoint_url"], s["bucket"])
        return list(objects), b"".join(objects.values())
    httpx.post(f"{s['url']}/{s['index']}*/_refresh", timeout=30)
    hits = httpx.post(f"{s['url']}/{s['index']}*/_search", json={"size": 10000}, timeout=30).json()["hits"]["hits"]
    return [h["_id"] for h in hits], json.dumps(hits).encode()


@pytest.mark.parametrize("credentials", list(CREDENTIALS))
@pytest.mark.parametrize("kind", ["local", "s3", "opensearch"])
def test_default_credentials_never_rewrite_ids_and_a_long_key_is_scrubbed(tmp_path, evals, request, kind, credentials):
    word, secret = CREDENTIALS[credentials]
    weak = secret == word
    store = store_settings(kind, word, request, tmp_path)
    (tmp_path / "talker.py").write_text(f"WORD = {word!r}\n" + textwrap.dedent(TALKER))
    (tmp_path / "agent_health_config.py").write_text(textwrap.dedent(CONFIG.format(store=store)))
    evals(f"{word}_bench.yaml", f"tests:\n  - name: {word} one\n    prompt: {word} the payment service\n")
    evals(f"{word}_code.eval.py", CODE_TEST.format(word=word))
    env = {
        "FAULTS_AGENT_TOKEN": secret,
        "FAULTS_STORE_PASSWORD": secret,
        "AWS_ACCESS_KEY_ID": word,
        "AWS_SECRET_ACCESS_KEY": secret,
    }
    proc = cli_in_process(
        "run", "evals", "--no-judge", "-v", "--reporter", "json=out/report.json", cwd=tmp_path, env=env
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "2 result(s) stored" in proc.stderr, proc.stderr

    # the run warned once, naming the setting, that the weak secret is not searched for in text
    warnings = [line for line in proc.stderr.splitlines() if "is short or a common word" in line]
    if weak:
        assert len(warnings) == 1, proc.stderr
        assert "agents.talker.settings.kwargs.token ($FAULTS_AGENT_TOKEN)" in warnings[0]
        assert secret not in warnings[0].replace("common word", "")  # the value itself is never printed
    else:
        assert warnings == [], proc.stderr

    report = RunReport.model_validate_json((tmp_path / "out" / "report.json").read_text())
    ids = {f"{word}_bench::{word}-one", f"{word}_code::{word}-keeps-its-words"}
    assert {r.test_id for r in report.results} == ids
    assert {r.suite for r in report.results} == {f"{word}_bench", f"{word}_code"}
    assert {r.name for r in report.results} == {f"{word} one", f"{word} keeps its words"}
    for result in report.results:
        assert result.status == "passed", result
        assert result.run is not None and result.run.raw_events[0]["token"] == REDACTED  # the whole value: kept out
        output = result.run.output
        assert f"This {word} run is about" in output  # words of the text stay
        assert output.endswith(f"key {secret}.") if weak else output.endswith(f"key {REDACTED}.")

    # stored under the keys of the ids, found by what the rollup reads
    keys, blob = stored_bytes(store)
    assert keys and not any(REDACTED in k or "REDACTED" in k for k in keys), keys
    inspect = dict(store["settings"])
    inspect.pop("auth", None)  # the test node has no security; the weak password stays out of this process
    opened = open_store(Config(root=str(tmp_path)), StoreSettings(type=kind, settings=inspect))
    assert {k.test_id for k in opened.list(agent="talker@v1")} == ids
    for suite in (f"{word}_bench", f"{word}_code"):
        [summary] = load_summaries(opened, "talker@v1", suite, [i for i in ids if i.startswith(suite + "::")])
        assert summary.status == "passed"
    if not weak:
        assert leaks(blob, secret) == []
        assert leaks(every_artifact(tmp_path, proc.stdout, proc.stderr), secret) == []


def test_a_weak_secret_is_kept_out_whole_and_its_word_stays_in_every_field():
    """The scrubber itself: field names, identifiers and literal fields are never rewritten."""
    secrets = SecretSet(["test"])
    result = TestResult(
        test_id="test_bench::test-one",
        name="test one",
        suite="test_bench",
        source_file="test_bench.yaml",
        labels=("test",),
        agent="test@v1",
        status="passed",
        error="a test failed",
        metrics={"test_id": "test", "note": "a test"},
        run=RunResult(output="test", agent="test@v1", run_id="test", raw_events=({"test": "test"},)),
    )
    out = secrets.scrub_model(result)
    assert (out.test_id, out.name, out.suite, out.labels, out.agent) == (
        "test_bench::test-one",
        "test one",
        "test_bench",
        ("test",),
        "test@v1",
    )
    assert out.error == "a test failed" and out.metrics == {"test_id": REDACTED, "note": "a test"}
    assert out.run is not None and (out.run.output, out.run.run_id, out.run.agent) == (REDACTED, "test", "test@v1")
    assert out.run.raw_events == ({"test": REDACTED},)
    assert TestResult.model_validate_json(out.model_dump_json()) == out


def test_a_strong_secret_is_scrubbed_from_every_value_and_mapping_keys_stay_names():
    key = "rk-" + random_secrets.token_urlsafe(30)
    out = SecretSet([key]).scrub({key: f"a {key} b", "list": [key.upper()]})
    assert out == {key: f"a {REDACTED} b", "list": [REDACTED]}  # values, in every case; names stay names


def test_a_value_that_cannot_be_scrubbed_is_emptied_never_crashing_the_run(caplog):
    """Raw events nested past the serializer's and the interpreter's depth: the search over the
    JSON and the walk both fail; the field is emptied (with a warning) and the rest is scrubbed."""
    key = "rk-" + random_secrets.token_urlsafe(30)
    deep: dict[str, Any] = {"token": key}
    for _ in range(5000):
        deep = {"k": deep}
    run = RunResult(output=f"the key is {key}", run_id="r1", raw_events=({"fine": 1}, deep))
    out = SecretSet([key]).scrub_model(run)
    assert out.output == f"the key is {REDACTED}" and out.run_id == "r1"
    assert out.raw_events == ()
    assert "RunResult.raw_events could not be scrubbed of secrets (RecursionError); it was emptied" in caplog.text
    assert key not in out.model_dump_json()


HTTP_CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{{
        "key": "rest",
        "connector": "http",
        "settings": {{"endpoint": "http://svc-user:Lit3ral-Pa55word@127.0.0.1:{port}/agent", "timeout_s": 5}},
        "versions": {{"v1": {{}}}},
    }}],
    default_agent="rest@v1",
)
"""

URL_TALKER = """
def run(prompt):
    return "The payment service cannot reach postgres://app:Db-Pa55word-9@db-primary:5432/payments"
"""


def test_url_userinfo_never_reaches_a_result_or_a_message(tmp_path, evals):
    """A literal `http://user:pw@host` endpoint was printed in errors and stored in results."""
    evals("smoke.yaml", "tests:\n  - name: outage\n    prompt: Diagnose why the payment service is failing.\n")
    (tmp_path / "agent_health_config.py").write_text(textwrap.dedent(HTTP_CONFIG.format(port=free_port())))
    proc = cli_in_process("run", "evals", "--no-judge", "-v", "--reporter", "json=out/report.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # nothing listens: the test errors
    [result] = RunReport.model_validate_json((tmp_path / "out" / "report.json").read_text()).results
    assert result.status == "errored" and f"http://{REDACTED}@127.0.0.1:" in (result.error or ""), result.error
    listing = cli_in_process("agents", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    blob = every_artifact(tmp_path, proc.stdout, proc.stderr, listing.stdout, listing.stderr)
    assert b"Lit3ral-Pa55word" not in blob and b"svc-user" not in blob


def test_url_userinfo_in_an_agent_answer_is_removed(tmp_path, evals):
    evals("smoke.yaml", "tests:\n  - name: outage\n    prompt: Diagnose why the payment service is failing.\n")
    (tmp_path / "talker.py").write_text(textwrap.dedent(URL_TALKER))
    config = CONFIG.format(store={"type": "local", "settings": {}}).replace(
        ', "kwargs": {"token": {"env": "FAULTS_AGENT_TOKEN"}}', ""
    )
    (tmp_path / "agent_health_config.py").write_text(textwrap.dedent(config))
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=out/report.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [result] = RunReport.model_validate_json((tmp_path / "out" / "report.json").read_text()).results
    assert result.run is not None
    assert result.run.output.endswith(f"postgres://{REDACTED}@db-primary:5432/payments"), result.run.output
    assert b"Db-Pa55word-9" not in every_artifact(tmp_path, proc.stdout, proc.stderr)
