"""Budgets held before each judge call (docs/budgets.md, agent_health/spend.py): a call's estimate
(its prompt's UTF-8 bytes / 3, its answer at the judge's max_tokens, priced) is reserved against the
run's budget and the test's cap with the spend so far and the calls in flight; a call that does not
fit is never made. So a run whose later tests have much longer judge prompts than the earlier ones
stays within its budget, where the per-test estimate alone (the most one finished test spent)
would start a test that passes it.

The judge is a real OpenAI-compatible HTTP server on 127.0.0.1 that counts a request's tokens as a
tokenizer would (its body's bytes / 4) and answers in 50 tokens."""

from __future__ import annotations

import asyncio
import re

import pytest

from agent_health.engine.budget import Budget
from agent_health.model import BudgetSettings, RunReport, Usage
from agent_health.spend import NOTHING, SpendRefused, estimate_tokens
from agent_health.stores import LocalResultStore
from tests.engine.test_budget import ENV, _load, _run, project
from tests.judges.helpers import ScriptedServer, chat, verdict_json
from tests.support.cli import cli_in_process

PRICE = (20.0, 40.0)  # USD per 1M input, output tokens: a judge call costs cents here

GROWING = """
from agent_health import test

def make(i):
    # the first ten judge a short claim; the next ten a claim 120 times longer
    detail = " and says which host and port it could not reach" * (0 if i < 10 else 120)

    @test(f"case {i:02d}", prompt="Diagnose why the payment service is failing.")
    async def body(agent, judge):
        await judge(await agent.run(), "identifies that the payment service cannot reach its database" + detail)

for i in range(20):
    make(i)
"""


@pytest.fixture
def sized_judge():
    """A judge server whose usage grows with the request, as a real model's does."""
    server = ScriptedServer()
    server.default = lambda rec: chat(verdict_json(), usage=(len(rec.raw) // 4, 50), model=rec.json["model"])
    server.delay_s = 0.02  # calls overlap: estimates of calls in flight are held together
    yield server
    server.close()


def growing(tmp_path, server, evals=GROWING):
    root = project(tmp_path, server, evals=evals)
    config = root / "agent_health_config.py"
    config.write_text(config.read_text().replace("(1.0, 2.0)", repr(PRICE)))
    return root


def test_the_token_estimate_is_utf8_bytes_over_three_rounded_up():
    assert [estimate_tokens(t) for t in ("", "a", "abc", "abcd", "é" * 3, "漢字")] == [0, 1, 1, 2, 2, 2]


def test_longer_later_judge_prompts_never_take_the_run_past_its_budget(sized_judge, tmp_path):
    root = growing(tmp_path, sized_judge)
    free = cli_in_process(
        "run", "evals", "--no-store", "--grep", "case 10", "--reporter", "json=free.json", cwd=root, env=ENV
    )
    assert free.returncode == 0, free.stdout + free.stderr
    [long_test] = RunReport.model_validate_json((root / "free.json").read_text()).results
    asked = len(sized_judge.posts())

    budget = 0.32
    p = cli_in_process(
        "run", "evals", "--no-store", "--max-cost", str(budget), "--reporter", "json=out.json", cwd=root, env=ENV
    )
    assert p.returncode == 1, p.stdout + p.stderr
    report = RunReport.model_validate_json((root / "out.json").read_text())
    ran = report.results
    short = max(r.cost_usd for r in ran)
    assert sorted(r.name for r in ran) == [f"case {i:02d}" for i in range(10)]  # every short one, none long
    assert all(r.status == "passed" for r in ran)
    assert report.budget.cost_usd <= budget  # exactly: never past it
    # the per-test estimate alone would have started case 10 (the spend and the most one test
    # spent fit the budget), and case 10 spends more than what was left
    done = sum(r.cost_usd for r in ran)
    assert done + short <= budget < done + long_test.cost_usd, (done, short, long_test.cost_usd)
    # case 10 started: its agent ran and counts; its judge call's estimate did not fit, so the
    # server never saw it, and the test is not run (not failed, not errored, not stored)
    agent_usd = long_test.cost_usd - long_test.judge_cost_usd
    assert report.budget.cost_usd == pytest.approx(done + agent_usd, abs=1e-6)
    assert len(sized_judge.posts()) - asked == 10
    assert report.not_run == 10 and report.not_run_reason == "budget reached"
    assert [t.name for t in report.not_run_tests] == [f"case {i:02d}" for i in range(10, 20)]
    assert report.budget.reached == "max_cost_usd" and report.summaries[0].pass_rate == 1.0
    assert "- not run many::case-10  budget reached" in p.stdout


def test_room_made_at_once_goes_to_the_earliest_test_waiting_not_to_the_first_to_look():
    """On a busy machine several calls settle before the calls waiting for room run again, and the
    first waiter to look again would take the room: the test above once saw case 10's long call
    take the room cases 08 and 09 waited for, and those two ended not run. Waiting calls take room
    in the order their tests were admitted, so the tests that run are the plan's first ones."""

    async def scenario() -> str:
        budget = Budget(BudgetSettings(max_judge_cost_usd=0.10), prices={"judge": (1.0, 0.0)})  # $1e-6 a token
        holder, early, late = (budget.open(name) for name in ("holder", "early", "late"))
        held = await holder.hold("judge", 90_000, 0)  # $0.09 of the $0.10
        # the later test's call waits first, so it is the first to look again when room is made
        late_call = asyncio.ensure_future(late.hold("judge", 60_000, 0))
        await asyncio.sleep(0)
        early_call = asyncio.ensure_future(early.hold("judge", 50_000, 0))
        await asyncio.sleep(0)
        assert late.waiting == early.waiting == 1
        held.settle(Usage(input_tokens=30_000, model="judge"))  # room for one of them: $0.07 free
        for _ in range(5):
            await asyncio.sleep(0)
        assert early.reserved.cost_usd == pytest.approx(0.05) and late.reserved == NOTHING
        (await early_call).settle(Usage(input_tokens=50_000, model="judge"))  # $0.08 counted: no room for $0.06
        with pytest.raises(SpendRefused) as refused:
            await late_call
        return str(refused.value)

    refusal = asyncio.run(scenario())
    assert "budget reached" in refusal and "max_judge_cost_usd" in refusal


def test_judge_spend_alone_is_held_call_by_call_from_the_first_test(sized_judge, tmp_path):
    """Judge calls are all held before they are made, so with a judge budget alone the first test
    does not run alone: tests run at the usual concurrency from the start."""
    root = growing(tmp_path, sized_judge)
    config, tests = _load(root)
    budget = 0.25
    outcome, report = _run(tests, config, {"max_judge_cost": budget, "concurrency": 4})
    assert sized_judge.max_in_flight > 1  # calls overlapped from the first tests
    assert report.budget.judge_cost_usd <= budget and report.budget.reached == "max_judge_cost_usd"
    assert report.budget.judge_cost_usd == pytest.approx(sum(r.judge_cost_usd for r in report.results), abs=1e-6)
    assert len(sized_judge.posts()) == len(report.results) and report.not_run == 20 - len(report.results)
    assert not outcome.exit_ok


def test_a_cache_hit_needs_no_room_in_the_budget(sized_judge, tmp_path):
    evals = """
from agent_health import test

@test("judged text", prompt="unused")
async def judged(judge):
    await judge("The payment service cannot reach db-primary:5432.", "names the database")
"""
    root = growing(tmp_path, sized_judge, evals=evals)
    config = root / "agent_health_config.py"
    config.write_text(config.read_text().replace('"cache": False', '"cache": True'))
    first = cli_in_process("run", "evals", "--no-store", cwd=root, env=ENV)
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(sized_judge.posts()) == 1

    tiny = "0.000001"  # less than any judge call's estimate
    p = cli_in_process(
        "run", "evals", "--no-store", "--max-cost", tiny, "--reporter", "json=hit.json", cwd=root, env=ENV
    )
    assert p.returncode == 0, p.stdout + p.stderr
    hit = RunReport.model_validate_json((root / "hit.json").read_text())
    assert [r.status for r in hit.results] == ["passed"] and hit.budget.judge_cache_hits == 1
    assert hit.budget.cost_usd == 0 and hit.budget.reached is None and len(sized_judge.posts()) == 1

    p = cli_in_process(
        "run",
        "evals",
        "--no-store",
        "--no-cache",
        "--max-cost",
        tiny,
        "--reporter",
        "json=miss.json",
        cwd=root,
        env=ENV,
    )
    assert p.returncode == 1, p.stdout + p.stderr  # without the cache the call does not fit: not made
    miss = RunReport.model_validate_json((root / "miss.json").read_text())
    assert miss.results == [] and miss.not_run == 1 and miss.budget.reached == "max_cost_usd"
    assert len(sized_judge.posts()) == 1


def test_rejudging_holds_each_judge_call_to_the_budget(sized_judge, tmp_path):
    root = growing(tmp_path, sized_judge)
    first = cli_in_process("run", "evals", cwd=root, env=ENV)  # stored in state/, no budget: all 20 run
    assert first.returncode == 0, first.stdout + first.stderr
    store = LocalResultStore(root / "state" / "results")
    stored = {r.test_id: r for r in store.get_many(store.list())}
    assert len(stored) == 20 and len(sized_judge.posts()) == 20
    short = stored["many::case-00"].judge_cost_usd

    budget = 12 * short  # the agent runs are replayed, free: room for the short judge calls
    p = cli_in_process("rejudge", "--max-cost", str(budget), "--reporter", "json=re.json", cwd=root, env=ENV)
    assert p.returncode == 1, p.stdout + p.stderr
    report = RunReport.model_validate_json((root / "re.json").read_text())
    assert report.budget.cost_usd <= budget and report.budget.reached == "max_cost_usd"
    assert 0 < len(report.results) < 20 and all(r.run.replayed for r in report.results)
    assert len(sized_judge.posts()) == 20 + len(report.results)  # a call that did not fit was never made
    assert report.budget.cost_usd == pytest.approx(sum(r.judge_cost_usd for r in report.results), abs=1e-6)
    assert {t.reason for t in report.not_run_tests} == {"budget reached"}
    assert report.not_run == 20 - len(report.results)
    after = {r.test_id: r for r in store.get_many(store.list())}
    for test_id in (t.test_id for t in report.not_run_tests):  # not run: the stored result stays
        assert after[test_id].eval_run_id == stored[test_id].eval_run_id


def test_a_cap_stops_the_judge_call_of_a_sync_body_before_it_is_made(sized_judge, tmp_path):
    """A sync body's judge call runs on the loop from a worker thread: the test's tab goes with it."""
    evals = """
from agent_health import test

@test("sync capped", prompt="Diagnose why the payment service is failing.", max_cost_usd=0.007)
def capped(agent, judge):
    judge(agent.run(), "names the database")
"""
    root = growing(tmp_path, sized_judge, evals=evals)
    config, tests = _load(root)
    _, report = _run(tests, config, {})
    [result] = report.results
    assert result.status == "errored" and sized_judge.posts() == []
    assert result.error.startswith("not judged: the judge call's estimated cost $")
    assert f"would take the test's cost ${result.cost_usd:.6f} past its cap of $0.007" in result.error


TWINS = """
from agent_health import test

def make(i):
    @test(f"twin {{i}}", prompt="unused", max_cost_usd={cap})
    async def body(judge):
        await judge("The payment service cannot reach db-primary:5432.", "names the database")

for i in range(2):
    make(i)
"""


def test_a_call_that_does_not_fit_waits_for_the_calls_in_flight(sized_judge, tmp_path):
    """Two identical judge calls start together; the budget holds one estimate and one counted call
    but not two estimates: the second waits until the first has counted less than its estimate,
    then fits and is made."""
    root = growing(tmp_path, sized_judge, evals=TWINS.format(cap=1e-6))
    config, tests = _load(root)
    _, probe = _run(tests[:1], config, {})  # a cap below any call: its error names the estimate
    estimate = float(re.search(r"estimated cost \$([\d.]+)", probe.results[0].error).group(1))
    root = growing(tmp_path, sized_judge, evals=TWINS.format(cap=1))
    config, tests = _load(root)
    _, free = _run(tests[:1], config, {})
    counted = free.results[0].judge_cost_usd
    assert 0 < counted < estimate

    sized_judge.delay_s = 0.3  # the first call is still in flight when the second asks for room
    before = len(sized_judge.posts())
    budget = estimate + counted + (estimate - counted) / 2  # less than two estimates
    _, report = _run(tests, config, {"max_judge_cost": budget, "concurrency": 2})
    assert sorted(r.status for r in report.results) == ["passed", "passed"] and report.not_run == 0
    assert len(sized_judge.posts()) - before == 2 and sized_judge.max_in_flight == 1  # one after the other
    assert report.budget.judge_cost_usd == pytest.approx(2 * counted) and report.budget.judge_cost_usd <= budget
