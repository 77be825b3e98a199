"""Spend budgets (docs/budgets.md): a run stops starting tests once the next could pass its budget,
reports the rest as not run ("budget reached") in every reporter, and exits 1 (or 0 with
--budget-exit 0); per-test caps end a test errored naming its cost; judge cache hits cost nothing;
a model without a price is an error at start when a budget is set.

The judge is a real OpenAI-compatible HTTP server on 127.0.0.1 answering with usage tokens."""

from __future__ import annotations

import asyncio
import json
import math
import re
import shlex
import xml.etree.ElementTree as ET

import pytest
import yaml

from agent_health import define_config, load_tests
from agent_health.errors import ConfigError
from agent_health.model import RunReport
from agent_health.reporters.json_report import read_jsonl
from agent_health.session import build_settings, run_evaluation
from agent_health.session.settings import RunSettings
from tests.conftest import ROOT
from tests.judges.helpers import ScriptedServer, chat, verdict_json
from tests.support.cli import cli_in_process

JUDGE_USAGE = (1000, 100)  # tokens of every judge answer
JUDGE_PRICE = (1.0, 2.0)  # USD per 1M input, output tokens: $0.0012 a judge call
JUDGE_CALL_USD = (JUDGE_USAGE[0] * JUDGE_PRICE[0] + JUDGE_USAGE[1] * JUDGE_PRICE[1]) / 1e6

MANY = """
from agent_health import test

def make(i):
    @test(f"case {i:03d}", prompt="Diagnose why the payment service is failing.")
    async def body(agent, judge):
        result = await agent.run()
        await judge(result, "identifies that the payment service cannot reach its database")

for i in range(200):
    make(i)
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    state_dir="state",
    prices={{"judge-model": {price!r}}},
    judge={{"provider": "openai", "model": "{model}", "cache": {cache}, "backoff_s": 0.01,
            "settings": {{"base_url": "{url}/v1", "max_tokens": 200}}}},
)
"""


@pytest.fixture
def judge_server():
    server = ScriptedServer()
    server.default = lambda rec: chat(verdict_json(), usage=JUDGE_USAGE, model=rec.json["model"])
    yield server
    server.close()


def project(tmp_path, server, *, model="judge-model", cache=False, evals=MANY):
    (tmp_path / "agent_health_config.py").write_text(
        CONFIG.format(price=JUDGE_PRICE, model=model, cache=cache, url=server.url)
    )
    (tmp_path / "evals").mkdir(exist_ok=True)
    (tmp_path / "evals" / "many.eval.py").write_text(evals)
    return tmp_path


ENV = {"AGENT_HEALTH_DEMO_LATENCY_MS": "0"}


def test_a_200_test_run_stops_within_one_tests_cost_and_every_reporter_lists_the_rest(judge_server, tmp_path):
    root = project(tmp_path, judge_server)
    budget = 0.05
    p = cli_in_process(
        "run",
        "evals",
        "--no-store",
        "--max-cost",
        str(budget),
        "--reporter",
        "summary",
        "--reporter",
        "json=out.json",
        "--reporter",
        "junit=out.xml",
        "--reporter",
        "html=out.html",
        "--reporter",
        "jsonl=out.jsonl",
        cwd=root,
        env=ENV,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    report = RunReport.model_validate_json((root / "out.json").read_text())
    ran = report.results
    assert all(r.status == "passed" for r in ran)  # nothing failed: the budget alone stopped the run
    spent = sum(r.cost_usd or 0.0 for r in ran)
    per_test = max(r.cost_usd or 0.0 for r in ran)
    assert per_test > JUDGE_CALL_USD  # the agent's spend counts with the judge's
    assert spent <= budget and budget - spent < per_test, (spent, per_test)
    assert 0 < len(ran) < 200 and len(ran) + report.not_run == 200
    assert len(judge_server.posts()) == len(ran)  # no test started past the budget

    assert report.not_run_reason == "budget reached"
    assert {t.reason for t in report.not_run_tests} == {"budget reached"}
    never = {t.name for t in report.not_run_tests}
    assert len(never) == report.not_run and never.isdisjoint(r.name for r in ran)
    summary = report.summaries[0]
    assert summary.not_run == report.not_run and summary.not_run_reason == "budget reached"
    assert summary.pass_rate == 1.0 and summary.total == len(ran)  # not run: out of the pass rate
    assert report.budget is not None and report.budget.reached == "max_cost_usd"
    assert math.isclose(report.budget.cost_usd, spent, abs_tol=1e-6)
    assert math.isclose(report.budget.judge_cost_usd, JUDGE_CALL_USD * len(ran), abs_tol=1e-6)

    assert f"{report.not_run} test(s) not run" in p.stdout and "budget reached" in p.stdout
    assert f"budget: cost ${spent:.4f} of ${budget:g}" in p.stdout
    first, last = report.not_run_tests[0], report.not_run_tests[-1]
    assert f"- not run {first.test_id}  budget reached" in p.stdout  # listed (the first 50; -v lists all)
    assert last.test_id == "many::case-199" and (last.test_id in p.stdout) == (report.not_run <= 50)

    xml = ET.parse(root / "out.xml").getroot()
    skipped = [c for c in xml.iter("testcase") if c.find("skipped") is not None]
    assert len(skipped) == report.not_run
    assert {c.find("skipped").get("message") for c in skipped} == {"not run: budget reached"}
    assert int(xml.get("tests")) == 200 and int(xml.get("failures")) == 0 and int(xml.get("errors")) == 0

    lines = read_jsonl(root / "out.jsonl")
    assert lines.not_run_tests == report.not_run_tests and lines.budget == report.budget

    html = (root / "out.html").read_text()
    assert 'id="not-run"' in html and html.count("<td>budget reached</td>") == report.not_run

    again = cli_in_process(
        "run", "evals", "--no-store", "--max-cost", str(budget), "--budget-exit", "0", cwd=root, env=ENV
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "budget reached" in again.stdout


def test_a_budget_stopped_run_resumes_with_only_missing_running_exactly_the_rest(judge_server, tmp_path):
    """The issue's resume path: a stored run the budget stopped, then `--only missing` runs exactly
    the tests it did not run, and none of those it stored again."""
    from agent_health.stores import LocalResultStore

    root = project(tmp_path, judge_server, evals=MANY.replace("range(200)", "range(40)"))
    first = cli_in_process("run", "evals", "--max-cost", "0.02", "--reporter", "json=first.json", cwd=root, env=ENV)
    assert first.returncode == 1, first.stdout + first.stderr
    stopped = RunReport.model_validate_json((root / "first.json").read_text())
    done = {r.test_id for r in stopped.results}
    never = {t.test_id for t in stopped.not_run_tests}
    assert done and never and done.isdisjoint(never) and len(done | never) == 40
    asked = len(judge_server.posts())

    store = LocalResultStore(root / "state" / "results")
    before = {r.test_id: r.eval_run_id for r in store.get_many(store.list())}
    assert set(before) == done
    resumed = cli_in_process("run", "evals", "--only", "missing", "--reporter", "json=resumed.json", cwd=root, env=ENV)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    report = RunReport.model_validate_json((root / "resumed.json").read_text())
    assert {r.test_id for r in report.results} == never, resumed.stdout  # exactly the rest
    assert report.skipped == len(done) and f"{len(done)} skipped as up to date" in resumed.stdout
    assert len(judge_server.posts()) - asked == len(never)  # nothing judged twice
    after = {r.test_id: r.eval_run_id for r in store.get_many(store.list())}
    assert set(after) == done | never and all(after[t] == before[t] for t in done)  # nothing stored repeated


def test_judge_budget_and_token_budget_stop_the_run_too(judge_server, tmp_path):
    root = project(tmp_path, judge_server)
    config, tests = _load(root)
    judge_budget = JUDGE_CALL_USD * 10.5
    outcome, report = _run(tests, config, {"max_judge_cost": judge_budget, "concurrency": 4})
    assert report.budget.reached == "max_judge_cost_usd" and outcome.run.not_run_reason == "budget reached"
    assert len(report.results) == 10 and report.budget.judge_cost_usd <= judge_budget
    assert not outcome.all_passed and not outcome.exit_ok  # exit 1 unless budget.exit_code is 0

    agent_tokens = report.results[0].usage.total_tokens
    per_test_tokens = agent_tokens + sum(JUDGE_USAGE)
    outcome, report = _run(tests, config, {"max_tokens": per_test_tokens * 3, "budget_exit": 0})
    # the third test's judge call is estimated at more than the 1,100 tokens it would have counted
    # (its prompt's bytes / 3, and the judge's max_tokens of 200 for the answer): it does not fit
    # what is left, so it is not made, and the third test is not run; its agent's tokens count
    assert report.budget.reached == "max_tokens" and len(report.results) == 2 and report.not_run == 198
    assert report.not_run_tests[0].test_id == "many::case-002" and len(judge_server.posts()) == 10 + 2
    assert report.budget.tokens == 3 * agent_tokens + 2 * sum(JUDGE_USAGE) <= per_test_tokens * 3
    assert outcome.exit_ok and not outcome.all_passed


def test_per_test_caps_end_the_test_errored_naming_the_cost(judge_server, tmp_path):
    evals = """
from agent_health import test

@test("capped", prompt="Diagnose why the payment service is failing.", max_cost_usd=0.0065)
async def capped(agent, judge):
    result = await agent.run()
    await judge(result, "names the database")
    await judge(result, "names the connection pool")

@test("roomy", prompt="Diagnose why the payment service is failing.", max_cost_usd=1)
async def roomy(agent, judge):
    await judge(await agent.run(), "names the database")
"""
    root = project(tmp_path, judge_server, evals=evals)
    data = [{"name": "data capped", "prompt": "Why is kafka lagging?", "expectedOutcomes": ["x"], "maxCostUsd": 0.0005}]
    (root / "evals" / "data.eval.json").write_text(json.dumps(data))
    config, tests = _load(root)
    _, report = _run(tests, config, {})
    by = {r.name: r for r in report.results}
    agent_usd = by["roomy"].cost_usd - JUDGE_CALL_USD
    assert agent_usd < 0.0065 < agent_usd + JUDGE_CALL_USD  # the first judge call would pass the cap

    capped = by["capped"]  # the first judge call's estimate would pass the cap: it is never made
    assert capped.status == "errored" and capped.score is None, capped
    assert capped.judge_cost_usd == 0.0 and capped.cost_usd == pytest.approx(agent_usd)
    estimate = re.search(r"estimated cost \$([\d.]+)", capped.error)
    assert estimate and float(estimate.group(1)) > JUDGE_CALL_USD  # estimated conservatively
    assert f"would take the test's cost ${capped.cost_usd:.6f} past its cap of $0.0065" in capped.error
    judged = [s for s in capped.signals if s.kind == "judge"]
    assert [s.errored for s in judged] == [True, True] and all("not judged" in s.reasoning for s in judged)
    assert len(judge_server.posts()) == 1  # roomy's call alone: the server never saw capped's

    data_capped = by["data capped"]  # the agent alone passed the cap: the judge was never asked
    assert data_capped.status == "errored" and data_capped.judge_cost_usd == 0.0
    assert f"cost ${data_capped.cost_usd:.6f} passed the test's cap of $0.0005" in data_capped.error
    assert by["roomy"].status == "passed" and by["roomy"].error is None
    # a cap is part of the test's definition: changing it changes the content hash
    hashes = {}
    for cap in (0.0005, 0.002):
        (root / "evals" / "data.eval.json").write_text(json.dumps([{"name": "d", "prompt": "Why?", "maxCostUsd": cap}]))
        hashes[cap] = {t.case.name: t.case.content_hash for t in load_tests([root / "evals"]).tests}["d"]
    assert hashes[0.0005] != hashes[0.002]

    (root / "evals" / "data.eval.json").write_text(
        json.dumps([{"name": "data capped", "prompt": "Why?", "maxCostUsd": float("nan")}])
    )
    loaded = load_tests([root / "evals"])
    assert any("max_cost_usd" in str(e) or "maxCostUsd" in str(e) for e in loaded.errors), loaded.errors


def test_judge_cache_hits_cost_nothing_and_say_so(judge_server, tmp_path):
    evals = """
from agent_health import test

@test("once", prompt="Diagnose why the payment service is failing.")
async def once(agent, judge):
    await judge(await agent.run(), "names the database")
"""
    root = project(tmp_path, judge_server, evals=evals, cache=True)
    config, tests = _load(root)
    _, first = _run(tests, config, {"max_cost": 1})
    assert first.results[0].judge_cost_usd == pytest.approx(JUDGE_CALL_USD) and first.budget.judge_cache_hits == 0
    _, second = _run(tests, config, {"max_cost": 1})
    hit = second.results[0]
    assert len(judge_server.posts()) == 1  # the second verdict came from the cache
    assert [s.cached for s in hit.signals if s.kind == "judge"] == [True]
    assert hit.judge_cost_usd == 0.0 and hit.judge_usage.total_tokens == 0
    assert second.budget.judge_cost_usd == 0.0 and second.budget.judge_cache_hits == 1
    assert "1 judge cache hit(s), $0" in second.budget.describe()


def test_a_model_without_a_price_is_an_error_at_start_with_a_budget(judge_server, tmp_path):
    root = project(tmp_path, judge_server, model="mystery-model-x1")
    p = cli_in_process("run", "evals", "--no-store", "--max-cost", "1", cwd=root, env=ENV)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "'mystery-model-x1' (judge.model) has no price" in p.stderr and "prices=" in p.stderr
    assert judge_server.posts() == []  # nothing ran


@pytest.mark.parametrize(
    "overrides, environ, message",
    [
        ({"max_cost": float("nan")}, {}, "max_cost"),
        ({"max_cost": 0}, {}, "max_cost"),
        ({"max_tokens": True}, {}, "max_tokens"),
        ({}, {"AGENT_HEALTH_MAX_COST": "inf"}, "$AGENT_HEALTH_MAX_COST"),
        ({}, {"AGENT_HEALTH_MAX_JUDGE_COST": "2e9"}, "$AGENT_HEALTH_MAX_JUDGE_COST"),
        ({"budget": {"max_cost": 1}}, {}, "budget.'max_cost'"),
    ],
)
def test_budget_settings_are_bounded_and_name_their_source(overrides, environ, message):
    with pytest.raises(ConfigError) as err:
        build_settings(define_config(), overrides, environ=environ)
    assert message in str(err.value)


def test_budget_precedence_flags_over_environment_over_configuration():
    config = define_config(budget={"max_cost_usd": 5, "max_tokens": 1000})
    settings = build_settings(config, {"max_cost": 2}, environ={"AGENT_HEALTH_MAX_TOKENS": "500"})
    assert settings.budget.max_cost_usd == 2 and settings.budget.max_tokens == 500
    assert settings.budget.exit_code == 1 and build_settings(config, environ={}).budget.max_cost_usd == 5
    with pytest.raises(ConfigError, match="budget"):
        define_config(budget={"max_cost_usd": float("inf")})


def _load(root):
    from agent_health import load_config

    config = load_config(root / "agent_health_config.py")
    loaded = load_tests([root / "evals"], root=root / "evals")
    assert not loaded.errors, loaded.errors
    return config, loaded.tests


def _run(tests, config, overrides):
    from agent_health.reporters.base import Reporter

    class Keep(Reporter):
        report: RunReport | None = None

        def finish(self, report: RunReport) -> None:
            self.report = report

    keep = Keep()
    settings: RunSettings = build_settings(config, {"no_store": True, **overrides}, environ=ENV)
    outcome = asyncio.run(run_evaluation(tests, config, settings, reporters=[keep]))
    assert keep.report is not None
    return outcome, keep.report


DOC = ROOT / "docs" / "budgets.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_EXIT = re.compile(r"#\s*exits (\d)")


def _shape(line: str) -> re.Pattern[str]:
    """A documented output line with its amounts and counts left open (spend varies a little with
    the demo agent's answers; the words and the form may not)."""
    return re.compile(re.sub(r"\\\$[\d.,]+|(?<![\w$])\d[\d,]*(?:\\\.\d+)?", r"\\$?[\\d.,]+", re.escape(line)))


def test_the_budgets_doc_examples_run_as_written(judge_server, tmp_path):
    """docs/budgets.md: its configuration and eval file are written as given, every command runs
    with the exit code its comment names, and every output block is what those commands print."""
    blocks = _FENCE.findall(DOC.read_text())
    for lang, code in blocks:
        if lang == "python":  # each starts with `# <path>`
            path = tmp_path / code.splitlines()[0].lstrip("# ").strip()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code)
    env = {**ENV, "JUDGE_BASE_URL": judge_server.url + "/v1"}
    printed = []
    for lang, code in blocks:
        if lang != "bash":
            continue
        for line in code.splitlines():
            args = shlex.split(line.split("#")[0])
            assert args[0] == "agent-health", line
            p = cli_in_process(*args[1:], "--no-store", cwd=tmp_path, env=env)
            assert p.returncode == int(_EXIT.search(line).group(1)), line + "\n" + p.stdout + p.stderr
            printed += (p.stdout + p.stderr).splitlines()
    assert (tmp_path / "budget.xml").exists()
    # the merged line of "Budgets and shards" is checked where shards are run: tests/faults/test_faults_shards.py
    outputs = [code for lang, code in blocks if lang == "" and not code.startswith("budget: tokens 4,057")]
    assert len(outputs) == 3
    for text in outputs:
        for line in text.splitlines():
            assert any(_shape(line).fullmatch(out.strip()) for out in printed), f"not printed: {line}"

    [yaml_block] = [code for lang, code in blocks if lang == "yaml"]
    from agent_health_dagster.defs.resources import EvaluateConfig

    run = EvaluateConfig(**yaml.safe_load(yaml_block))
    assert run.budget is not None and run.budget.max_cost_usd == 5.0 and run.budget.max_judge_cost_usd == 2.0


def test_dagster_run_config_budget_wins_over_the_resource_limit_by_limit(judge_server, tmp_path):
    from agent_health_dagster.defs.resources import AgentHealthResource, BudgetConfig, EvaluateConfig

    root = project(tmp_path, judge_server)
    resource = AgentHealthResource(
        config_path=str(root / "agent_health_config.py"), budget=BudgetConfig(max_cost_usd=9, max_tokens=100)
    )
    settings = resource.run_settings(EvaluateConfig(budget=BudgetConfig(max_cost_usd=2)))
    assert settings.budget.max_cost_usd == 2 and settings.budget.max_tokens == 100
    assert resource.run_settings().budget.max_cost_usd == 9
    rejudging = resource.run_settings(more={"budget": BudgetConfig(max_tokens=5)})  # the rejudge job's config
    assert rejudging.budget.max_tokens == 5 and rejudging.budget.max_cost_usd == 9
    with pytest.raises(ConfigError, match="budget.max_tokens"):
        AgentHealthResource(config_path=str(root / "agent_health_config.py")).run_settings(
            EvaluateConfig(budget=BudgetConfig(max_tokens=10**12))
        )


def test_rejudging_respects_the_budget_and_counts_only_new_judge_spend(judge_server, tmp_path):
    root = project(tmp_path, judge_server, evals=MANY.replace("range(200)", "range(20)"))
    first = cli_in_process("run", "evals", cwd=root, env=ENV)  # stored in state/, no budget: all 20 run
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(judge_server.posts()) == 20

    budget = JUDGE_CALL_USD * 5.5  # room for five re-judgements: the agent runs are replayed, free
    p = cli_in_process("rejudge", "--max-cost", str(budget), "--reporter", "json=re.json", cwd=root, env=ENV)
    assert p.returncode == 1, p.stdout + p.stderr
    report = RunReport.model_validate_json((root / "re.json").read_text())
    assert len(report.results) == 5 and report.not_run == 15 and report.not_run_reason == "budget reached"
    assert len(judge_server.posts()) == 20 + 5
    assert report.budget.cost_usd == pytest.approx(5 * JUDGE_CALL_USD)  # judge spend only
    assert all(r.run is not None and r.run.replayed for r in report.results)
    assert "budget reached" in p.stdout


def test_a_model_met_only_while_running_without_a_price_stops_the_run_not_counted_as_zero(judge_server, tmp_path):
    evals = """
from agent_health import test

def make(i):
    @test(f"case {i}", prompt="Diagnose why the payment service is failing.")
    async def body(agent, judge):
        await judge(await agent.run(), "names the database", model="openai:unpriced-judge-9")

for i in range(5):
    make(i)
"""
    root = project(tmp_path, judge_server, evals=evals)
    config, tests = _load(root)
    outcome, report = _run(tests, config, {"max_cost": 1})
    # the first judge call cannot be priced, so it cannot be held to the budget: it is not made,
    # its test is not run, and no more tests start
    assert report.results == [] and report.not_run == 5 and report.not_run_reason == "budget reached"
    assert report.budget.reached.startswith("cost unknown: no price for")
    assert "unpriced-judge-9" in report.budget.reached and judge_server.posts() == []
    assert not outcome.exit_ok
