"""Provenance: every result records what produced it (harness version, eval file, content hash, the
agent version's settings hash without secrets, the judge settings hash), and every verdict the judge
that gave it (provider, model, endpoint, evaluator or rubric and its definition hash, prompt
template version, cache keys), through a real OpenAI-compatible judge server on 127.0.0.1."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest

from agent_health import define_config, load_tests, run_tests
from agent_health.config.fingerprints import agent_settings_hash, agent_version_data_version, judge_settings_hash
from agent_health.judges.cache import LocalJudgeCache
from agent_health.judges.prompt import PROMPT_VERSION
from agent_health.judges.rubric import Rubric
from agent_health.model import JudgeIdentity, RunSettings
from agent_health.model.calibration import CalibrationGate
from agent_health.pipeline import partition_metadata
from agent_health.stores import LocalResultStore, ResultKey
from tests.judges.helpers import NONCE, ScriptedServer, chat, verdict_json

from .helpers import CountingAgent

EVAL = """
from agent_health import test, expect

@test("payment outage", prompt="Diagnose why the payment service is failing.")
async def payment(agent, judge):
    result = await agent.run()
    expect(result).to_have_called_tool("search_logs")
    await judge(result, "identifies that the payment service cannot reach its database")
    await judge.observe(result, {"criteria": "grades the RCA", "evaluator": "rca"})
    await judge.observe(result, {"criteria": "is short", "evaluator": "short"})
    await judge.observe(result, {"criteria": "mentions the database", "evaluator": "demo"})
"""

SECRET = "s3cr3t-agent-token-value"


def short(output):
    return {"pass": len(output) < 10_000, "score": 1.0, "reasoning": "short enough"}


def rubric(threshold: float = 0.5) -> Rubric:
    return Rubric.from_json(
        {
            "name": "rca",
            "scoringConfig": {"metrics": [{"name": "accuracy", "scale": "1-5"}]},
            "passThreshold": threshold,
        }
    )


def reply(rec):
    if "Metrics and scales" in rec.json["messages"][-1]["content"]:
        return chat(json.dumps({"nonce": NONCE, "metrics": {"accuracy": 4}, "reasoning": "ok", "suggestions": []}))
    return chat(verdict_json(True, 0.9))


@pytest.fixture
def agent_server():
    agent = CountingAgent()
    yield agent
    agent.close()


@pytest.fixture
def judge_server():
    server = ScriptedServer()
    server.default = reply
    yield server
    server.close()


def project(tmp_path, server, agent, *, threshold=0.5, model="sre-1", **judge):
    (tmp_path / "evals").mkdir(exist_ok=True)
    (tmp_path / "evals" / "prov.eval.py").write_text(EVAL)
    config = define_config(
        root=str(tmp_path),
        state_dir="state",
        agents=[
            {
                "key": "sre",
                "connector": "http",
                "settings": {
                    "endpoint": agent.url,
                    "headers": {"Authorization": "Bearer ${PROV_AGENT_TOKEN}"},
                    "body": {"model": model},
                },
                "versions": {"v1": {}},
            }
        ],
        evaluators={"rca": rubric(threshold), "short": short},
        judge={"provider": "openai", "model": "judge-model", "settings": {"base_url": server.url + "/v1"}, **judge},
    )
    tests = load_tests([tmp_path / "evals"], root=tmp_path / "evals").tests
    return config, tests


def run(tmp_path, config, tests):
    store = LocalResultStore(tmp_path / "results")
    settings = RunSettings(agents=("sre@v1",), store={"type": "local", "settings": {"path": str(tmp_path / "results")}})
    (result,) = run_tests(tests, config, settings=settings)
    return result, store


def identities(result) -> list[JudgeIdentity]:
    return [JudgeIdentity.model_validate(s.evidence["provenance"]) for s in result.signals if s.kind == "judge"]


def test_every_result_records_what_produced_it_without_secrets(tmp_path, judge_server, agent_server, monkeypatch):
    monkeypatch.setenv("PROV_AGENT_TOKEN", SECRET)
    config, tests = project(tmp_path, judge_server, agent_server)
    result, store = run(tmp_path, config, tests)
    prov = result.provenance
    assert prov is not None
    assert prov.harness_version == version("agent-health") and prov.harness_version
    assert prov.eval_file == "prov.eval.py" == tests[0].case.source_file
    assert prov.content_hash == tests[0].case.content_hash and len(prov.content_hash) == 64
    assert prov.agent_settings_hash == agent_settings_hash(config, "sre@v1")
    assert prov.judge_settings_hash == judge_settings_hash(config)
    assert prov.agent_eval_run_id == result.eval_run_id and prov.judged_at >= result.started_at
    # stored as it was built; the agent got the secret, and no stored file holds it
    stored = store.get(ResultKey.of(result))
    assert stored is not None and stored.provenance == prov
    assert agent_server.headers[-1]["authorization"] == f"Bearer {SECRET}"
    stored_text = "".join(p.read_text() for p in (tmp_path / "results").rglob("*.json*"))  # results.jsonl too
    assert prov.agent_settings_hash in stored_text and SECRET not in stored_text

    # the hash follows the settings, never the secret's value: a new token keeps it, a new model changes it
    monkeypatch.setenv("PROV_AGENT_TOKEN", "another-token-value-entirely")
    again, _ = run(tmp_path, config, tests)
    assert again.provenance.agent_settings_hash == prov.agent_settings_hash
    changed, _ = project(tmp_path, judge_server, agent_server, model="sre-2")
    assert agent_settings_hash(changed, "sre@v1") != prov.agent_settings_hash
    # the same hashing as the Dagster data version (which adds the judge settings)
    assert agent_version_data_version(changed, "sre@v1") != agent_version_data_version(config, "sre@v1")


def test_every_verdict_names_its_judge_cached_ones_too(tmp_path, judge_server, agent_server, monkeypatch):
    monkeypatch.setenv("PROV_AGENT_TOKEN", SECRET)
    config, tests = project(tmp_path, judge_server, agent_server)
    result, _ = run(tmp_path, config, tests)
    llm, rubric_id, custom, demo = identities(result)
    endpoint = judge_server.url + "/v1"
    assert llm.model_dump() == {
        "provider": "openai",
        "model": "judge-model",
        "endpoint": endpoint,
        "evaluator": "builtin:contextual",
        "kind": "llm",
        "definition_hash": llm.definition_hash,
        "prompt_version": PROMPT_VERSION,
        "cache_keys": llm.cache_keys,
    }
    assert llm.definition_hash and len(llm.cache_keys) == 1
    assert (rubric_id.provider, rubric_id.model, rubric_id.kind, rubric_id.evaluator) == (
        "openai",
        "judge-model",
        "rubric",
        "rca",
    )
    assert rubric_id.prompt_version == PROMPT_VERSION and len(rubric_id.cache_keys) == 1
    assert (custom.provider, custom.model, custom.kind, custom.evaluator) == ("python", None, "custom", "short")
    assert custom.cache_keys == () and custom.definition_hash
    assert (demo.provider, demo.model, demo.kind) == ("demo", "demo-heuristic", "demo")
    # the cache keys are the real keys of the judge cache
    cache = LocalJudgeCache(tmp_path / "state" / "judge_cache.sqlite")
    try:
        assert cache.get(llm.cache_keys[0])["passed"] is True
        assert "text" in cache.get(rubric_id.cache_keys[0])
    finally:
        cache.close()

    # a second run is served from the cache and names the same judges under the same keys
    posts = len(judge_server.posts())
    cached, _ = run(tmp_path, config, tests)
    assert len(judge_server.posts()) == posts
    verdicts = [s for s in cached.signals if s.kind == "judge"]
    assert verdicts[0].cached and verdicts[1].cached
    assert identities(cached) == [llm, rubric_id, custom, demo]


def test_definition_hashes_follow_the_definitions(tmp_path, judge_server, agent_server, monkeypatch):
    monkeypatch.setenv("PROV_AGENT_TOKEN", SECRET)
    config, tests = project(tmp_path, judge_server, agent_server)
    result, _ = run(tmp_path, config, tests)
    other_config, _ = project(tmp_path, judge_server, agent_server, threshold=0.9, max_step_chars=500)
    other, _ = run(tmp_path, other_config, tests)
    (llm, rub, custom, demo), (llm2, rub2, custom2, demo2) = identities(result), identities(other)
    assert rub.definition_hash != rub2.definition_hash  # the rubric's threshold changed
    assert llm.definition_hash != llm2.definition_hash  # the judge prompt's limits changed
    assert llm.cache_keys != llm2.cache_keys
    assert (custom.definition_hash, demo.definition_hash) == (custom2.definition_hash, demo2.definition_hash)
    assert result.provenance.judge_settings_hash != other.provenance.judge_settings_hash

    def short(output):  # the same name, another body
        return {"pass": True, "score": 0.5, "reasoning": "changed"}

    third_config = other_config.model_copy(update={"evaluators": {**other_config.evaluators, "short": short}})
    third, _ = run(tmp_path, third_config, tests)
    assert identities(third)[2].definition_hash != custom.definition_hash


def test_errored_verdicts_name_the_judge_that_failed(tmp_path, judge_server, agent_server, monkeypatch):
    monkeypatch.setenv("PROV_AGENT_TOKEN", SECRET)
    judge_server.default = lambda r: (500, {}, {"error": "judge backend down"})
    config, tests = project(tmp_path, judge_server, agent_server, cache=False, max_retries=0)
    result, _ = run(tmp_path, config, tests)
    assert result.status == "errored"
    first = identities(result)[0]
    assert (first.provider, first.model, first.evaluator) == ("openai", "judge-model", "builtin:contextual")
    assert first.cache_keys == ()  # nothing was cached for it


def test_partition_metadata_shows_provenance(tmp_path, judge_server, agent_server, monkeypatch):
    monkeypatch.setenv("PROV_AGENT_TOKEN", SECRET)
    config, tests = project(tmp_path, judge_server, agent_server)
    result, _ = run(tmp_path, config, tests)
    meta = partition_metadata(result)
    assert meta["harness_version"] == version("agent-health")
    assert meta["agent_settings_hash"] == result.provenance.agent_settings_hash
    assert (
        meta["judges"]
        == "openai:judge-model (builtin:contextual), openai:judge-model (rca), python (short), demo:demo-heuristic"
    )
    assert "judgements" not in meta  # never re-judged


def test_judge_credentials_reach_no_identity_and_no_stored_result(tmp_path, judge_server, agent_server, monkeypatch):
    """The judge's endpoint is part of its identity without its user:password, and neither the
    password nor the API key reach a stored result, even from a judge that echoes them."""
    password, key = "judge-url-pass-7f3a", "sk-judge-key-value-91c2"
    monkeypatch.setenv("PROV_AGENT_TOKEN", SECRET)
    monkeypatch.setenv("PROV_JUDGE_KEY", key)
    judge_server.default = lambda rec: (
        reply(rec)
        if "Metrics and scales" in rec.json["messages"][-1]["content"]
        else chat(verdict_json(True, 0.9, f"I was called with {password} and {key}"))
    )
    host = judge_server.url.removeprefix("http://")
    settings = {"base_url": f"http://judge:{password}@{host}/v1", "api_key_env": "PROV_JUDGE_KEY"}
    config, tests = project(tmp_path, judge_server, agent_server, settings=settings)
    result, _ = run(tmp_path, config, tests)
    llm = identities(result)[0]
    assert llm.endpoint == judge_server.url + "/v1"  # the endpoint still tells two servers apart
    assert judge_server.posts()[-1].headers["authorization"]  # the judge was called with credentials
    stored_text = "".join(p.read_text() for p in (tmp_path / "results").rglob("*.json*"))
    assert "I was called with" in stored_text
    assert password not in stored_text and key not in stored_text and SECRET not in stored_text
    assert password not in json.dumps(partition_metadata(result)) and key not in json.dumps(partition_metadata(result))


# A changed value for every judge setting. A new JudgeSettings field fails the test below until it
# is added here, as counting (it changes verdicts) or operational (declared so in config/model.py).
CHANGED_JUDGE_SETTINGS = {
    "provider": "bedrock",
    "model": "judge-model-2",
    "settings": {"temperature": 0.7},
    "providers": {"second": {"type": "openai", "model": "other"}},
    "per_test": {"*payment*": "openai:other-model"},
    "rubrics": {"rca2": "rubric.json"},
    "max_output_chars": 5000,
    "max_step_chars": 500,
    "max_steps": 20,
    "max_trace_chars": 3000,
    "max_tool_steps": 2,
    "calibration": CalibrationGate(min_kappa=0.7, min_labels=10),
}
OPERATIONAL_JUDGE_SETTINGS = {
    "concurrency": 2,
    "cache": False,
    "cache_file": "other_cache.sqlite",
    "max_retries": 1,
    "backoff_s": 0.5,
    "backoff_max_s": 5.0,
}


def test_changing_any_judge_setting_that_reaches_the_judge_marks_stored_results_stale(
    tmp_path, judge_server, agent_server, monkeypatch
):
    from agent_health.pipeline.freshness import current_state, out_of_date

    monkeypatch.setenv("PROV_AGENT_TOKEN", SECRET)
    config, tests = project(tmp_path, judge_server, agent_server)
    (tmp_path / "rubric.json").write_text(json.dumps({"name": "rca2", "passThreshold": 0.5}))
    result, store = run(tmp_path, config, tests)
    stored = list(store.get_summaries([ResultKey("sre@v1", result.suite, result.test_id)]))
    assert stored and stored[0].judge_settings_hash == judge_settings_hash(config)
    current = {result.test_id: result.provenance.content_hash}
    assert out_of_date(stored, current_state(config, current.items(), ["sre@v1"])) == {}

    fields = set(type(config.judge).model_fields)
    assert fields == set(CHANGED_JUDGE_SETTINGS) | set(OPERATIONAL_JUDGE_SETTINGS), (
        "a judge setting was added or removed: say whether it changes verdicts in the tables above"
    )

    def stale_after(**change):
        changed = config.model_copy(update={"judge": config.judge.model_copy(update=change)})
        return out_of_date(stored, current_state(changed, current.items(), ["sre@v1"]))

    for name, value in CHANGED_JUDGE_SETTINGS.items():
        assert getattr(config.judge, name) != value
        assert stale_after(**{name: value}) == {result.test_id: ["judge settings changed"]}, name
    for name, value in OPERATIONAL_JUDGE_SETTINGS.items():
        assert getattr(config.judge, name) != value
        assert stale_after(**{name: value}) == {}, name

    # A rubric file counts by content: editing it marks results judged with it stale.
    with_rubric = config.model_copy(
        update={"judge": config.judge.model_copy(update={"rubrics": {"rca2": "rubric.json"}})}
    )
    before = current_state(with_rubric, current.items(), ["sre@v1"]).judge_settings
    (tmp_path / "rubric.json").write_text(json.dumps({"name": "rca2", "passThreshold": 0.9}))
    assert current_state(with_rubric, current.items(), ["sre@v1"]).judge_settings != before
