"""The engine: statuses, fixtures and hooks, isolation under concurrency, timeouts, epochs."""

from __future__ import annotations

import json

from agent_health import load_tests
from agent_health.judges.base import JudgeProvider
from agent_health.judges.service import JudgeService
from tests.core.helpers import body_signals, run_dir, run_engine


def test_statuses_follow_gate_signals(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test, expect

        @test("passes", prompt="Diagnose why the payment service is failing.")
        async def passes(agent):
            r = await agent.run()
            expect(r).to_have_called_tool("search_logs")

        @test("fails", prompt="Diagnose why the payment service is failing.")
        async def fails(agent):
            r = await agent.run()
            expect(r).to_have_called_tool("restart_service")
            raise RuntimeError("never reached: a failed expect stops the body")

        @test("errors", prompt="x")
        async def errors(agent):
            {}["missing"]
    """,
    )
    res = run_dir(tmp_path / "evals")
    assert res["passes"].status == "passed" and res["passes"].score == 1.0
    assert res["fails"].status == "failed"
    assert "restart_service" in res["fails"].error and len(body_signals(res["fails"])) == 1
    assert res["errors"].status == "errored"
    assert "KeyError" in res["errors"].error and "s.eval.py:" in res["errors"].error


def test_soft_expect_continues_and_plain_assert_fails(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test, expect

        @test("soft")
        def soft():
            expect.soft(1).to_equal(2)
            expect.soft("abc").to_contain("b")
            assert 1 + 1 == 3, "arithmetic is broken"
    """,
    )
    r = run_dir(tmp_path / "evals")["soft"]
    assert r.status == "failed"
    assert [s.passed for s in r.signals] == [False, True, False]
    assert r.signals[0].soft and r.signals[0].evidence == {"expected": 2, "actual": 1}
    assert "arithmetic is broken" in r.signals[2].reasoning


def test_second_agent_run_is_a_clear_error(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test

        @test("twice", prompt="payment service failing")
        async def twice(agent):
            await agent.run()
            await agent.run("again")
    """,
    )
    r = run_dir(tmp_path / "evals")["twice"]
    assert r.status == "errored"
    assert "agent.run() was already called" in r.error and "'twice'" in r.error
    assert r.run is not None  # the first run is kept


def test_no_prompt_anywhere_is_a_clear_error(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test

        @test("no prompt")
        async def no_prompt(agent):
            await agent.run()
    """,
    )
    r = run_dir(tmp_path / "evals")["no prompt"]
    assert r.status == "errored" and "has no prompt" in r.error


def test_teardown_and_hooks_run_in_order_even_when_body_fails(write_eval, tmp_path):
    log = tmp_path / "log.jsonl"
    write_eval(
        "s.eval.py",
        f"""
        import json
        from agent_health import test, expect, describe, fixture, before_all, after_all, before_each, after_each

        def note(x):
            with open({str(log)!r}, "a") as f:
                f.write(json.dumps(x) + "\\n")

        @before_all
        def ba(): note("file before_all")
        @after_all
        def aa(): note("file after_all")
        @before_each
        def be(): note("file before_each")
        @after_each
        def ae(): note("file after_each")

        @fixture
        def res():
            note("setup res")
            yield "r"
            note("teardown res")

        @fixture
        async def ares(res):
            note("setup ares")
            yield res + "a"
            note("teardown ares")

        with describe("group"):
            @before_each
            def gbe(test_info): note("group before_each " + test_info.name)
            @after_each
            def gae(): note("group after_each")

            @test("body fails")
            async def body_fails(ares):
                note("body " + ares)
                expect(1).to_equal(2)
    """,
    )
    r = run_dir(tmp_path / "evals")["group > body fails"]
    assert r.status == "failed"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines == [
        "file before_all",
        "file before_each",
        "group before_each group > body fails",
        "setup res",
        "setup ares",
        "body ra",
        "group after_each",
        "file after_each",
        "teardown ares",
        "teardown res",
        "file after_all",
    ]


def test_failing_hook_or_fixture_errors_the_test_and_still_tears_down(write_eval, tmp_path):
    log = tmp_path / "log.txt"
    write_eval(
        "s.eval.py",
        f"""
        from agent_health import test, fixture, before_each, describe, before_all

        @fixture
        def res():
            yield 1
            open({str(log)!r}, "a").write("teardown\\n")

        @fixture
        def broken(res):
            raise OSError("disk gone")

        @test("uses broken fixture")
        def t1(broken): pass

        with describe("g"):
            @before_all
            def explode(): raise ValueError("no seed data")
            @test("in broken scope")
            def t2(): pass
    """,
    )
    res = run_dir(tmp_path / "evals")
    assert res["uses broken fixture"].status == "errored"
    assert "fixture 'broken' failed during setup: OSError: disk gone" in res["uses broken fixture"].error
    assert log.read_text() == "teardown\n"
    assert res["g > in broken scope"].status == "errored"
    assert "before_all hook 'explode' failed" in res["g > in broken scope"].error


def test_timeout_is_a_failure_with_a_signal(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        import asyncio
        from agent_health import test

        @test("slow", timeout=0.2)
        async def slow():
            await asyncio.sleep(5)
    """,
    )
    r = run_dir(tmp_path / "evals")["slow"]
    assert r.status == "failed"
    assert r.signals[-1].name == "timeout" and "0.2s" in r.signals[-1].reasoning
    assert r.duration_ms < 2000


def test_hundred_concurrent_tests_keep_their_own_signals(write_eval, tmp_path):
    # 100 tests whose bodies interleave awaits with each other
    src = ["import asyncio, random", "from agent_health import test, expect, judge"]
    for i in range(100):
        src += [
            f"@test('t{i:03d}', prompt='payment service failing case {i}')",
            f"async def t{i}(agent, judge):",
            f"    rnd = random.Random({i})",
            "    for k in range(3):",
            "        await asyncio.sleep(rnd.random() / 200)",
            f"        expect.soft('test-{i}-signal-' + str(k)).to_contain('test-{i}-')",
            "    r = await agent.run()",
            "    await judge(r, 'payment service')",
            f"    expect(r.prompt).to_contain('case {i}')",
        ]
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "many.eval.py").write_text("\n".join(src) + "\n")
    res = run_dir(tmp_path / "evals", concurrency=100)
    assert len(res) == 100
    for i in range(100):
        r = res[f"t{i:03d}"]
        assert r.status == "passed", r.error
        names = [s.name for s in body_signals(r)]
        assert len(names) == 5
        assert all(f"test-{i}-" in (s.evidence or {}).get("actual", "") for s in r.signals[:3])
        assert r.signals[4].evidence["expected"] == f"case {i}"


def test_sync_bodies_run_in_worker_threads(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        import threading
        from agent_health import test, expect

        @test("sync", prompt="checkout latency is high")
        def sync(agent, judge):
            assert threading.current_thread() is not threading.main_thread()
            r = agent.run()
            v = judge(r, "redis cache hit ratio")
            expect(v.passed).to_equal(True)
    """,
    )
    r = run_dir(tmp_path / "evals")["sync"]
    assert r.status == "passed", r.error
    assert [s.kind for s in body_signals(r)] == ["judge", "deterministic"]


def test_judge_roles_skip_mode_and_or_throw(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test, expect

        @test("observe never gates", prompt="payment service failing")
        async def observe(agent, judge):
            r = await agent.run()
            await judge.observe(r, "talks about quantum chromodynamics")

        @test("or_throw stops", prompt="payment service failing")
        async def or_throw(agent, judge):
            r = await agent.run()
            (await judge(r, "talks about quantum chromodynamics")).or_throw()
            expect(1).to_equal(1)

        @test("skipped per test", prompt="payment service failing", skip_judge=True)
        async def skipped(agent, judge):
            r = await agent.run()
            v = await judge(r, "talks about quantum chromodynamics")
            v.or_throw()
    """,
    )
    res = run_dir(tmp_path / "evals")
    obs = res["observe never gates"]
    assert obs.status == "passed" and obs.signals[0].role == "observe" and obs.signals[0].passed is False
    assert obs.score is not None and obs.score < 0.5  # observe verdicts still feed the score
    thrown = res["or_throw stops"]
    assert thrown.status == "failed" and len(body_signals(thrown)) == 1
    sk = res["skipped per test"]
    assert sk.status == "passed" and sk.signals[0].skipped and sk.score is None


class ExplodingJudge(JudgeProvider):
    name = "exploding"

    async def evaluate(self, request):
        raise ConnectionError("judge endpoint unreachable")


def test_judge_failure_errors_the_test_with_the_real_message(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test

        @test("judged", prompt="payment service failing")
        async def judged(agent, judge):
            r = await agent.run()
            v = await judge(r, "anything")
            assert v.errored
    """,
    )
    r = run_dir(tmp_path / "evals", judges=JudgeService(ExplodingJudge()))["judged"]
    assert r.status == "errored"
    assert "judge endpoint unreachable" in r.error and r.score is None


def test_skip_mode_from_options_makes_verdicts_neutral(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test

        @test("j", prompt="payment service failing")
        async def j(agent, judge):
            r = await agent.run()
            await judge(r, "talks about quantum chromodynamics")
    """,
    )
    r = run_dir(tmp_path / "evals", judges=JudgeService(ExplodingJudge(), skip=True))["j"]
    assert r.status == "passed" and r.signals[0].skipped and r.evaluation_type == "deterministic"


def test_epochs_report_pass_at_k_and_flakiness(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test, expect

        state = {"n": 0}

        @test("flaky", epochs=4)
        def flaky():
            state["n"] += 1
            expect(state["n"] % 2).to_equal(0)

        @test("stable", prompt="payment service failing")
        async def stable(agent):
            r = await agent.run()
            expect(r).to_have_called_tool("search_logs")
    """,
    )
    res = run_dir(tmp_path / "evals", epochs=3, concurrency=1)
    flaky = res["flaky"]
    assert flaky.epochs == 4 and len(flaky.trials) == 4
    assert [t.status for t in flaky.trials] == ["failed", "passed", "failed", "passed"]
    assert flaky.status == "failed" and flaky.flaky and flaky.pass_at_k == 1.0 and flaky.pass_hat_k == 0.0
    assert flaky.score == 0.5
    stable = res["stable"]
    assert stable.epochs == 3 and stable.pass_hat_k == 1.0 and not stable.flaky
    assert stable.usage.total_tokens == 3 * stable.trials[0].run.usage.total_tokens


def test_evaluation_type_is_inferred_from_signals(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test, expect

        @test("det")
        def det(): expect(1).to_equal(1)

        @test("agentic", prompt="payment service")
        async def agentic(agent, judge):
            await judge(await agent.run(), "payment service")

        @test("hybrid", prompt="payment service")
        async def hybrid(agent, judge):
            r = await agent.run()
            expect(r).to_have_called_tool("search_logs")
            await judge(r, "payment service")
    """,
    )
    res = run_dir(tmp_path / "evals")
    assert [res[n].evaluation_type for n in ("det", "agentic", "hybrid")] == ["deterministic", "agentic", "hybrid"]


def test_fail_fast_stops_starting_tests(write_eval, tmp_path):
    src = ["from agent_health import test, expect"]
    for i in range(20):
        src += [f"@test('t{i:02d}')", f"def t{i}():", f"    expect({i}).to_be_less_than(3)"]
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "ff.eval.py").write_text("\n".join(src) + "\n")
    loaded = load_tests([tmp_path / "evals"])
    res, outcome = run_engine(loaded.tests, concurrency=1, fail_fast=True)
    assert sorted(res) == ["t00", "t01", "t02", "t03"]
    assert outcome.run.not_run == {"demo@v2": 16}


def test_after_all_failure_is_reported(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test, after_all

        @after_all
        def boom(): raise RuntimeError("cleanup failed")

        @test("t")
        def t(): pass
    """,
    )
    loaded = load_tests([tmp_path / "evals"])
    res, outcome = run_engine(loaded.tests)
    assert res["t"].status == "passed"
    assert len(outcome.run.hook_errors) == 1 and "cleanup failed" in outcome.run.hook_errors[0]


def test_a_scopes_hooks_run_around_its_own_tests_not_at_the_runs_edges(write_eval, tmp_path):
    """`before_all` runs before a scope's first test and `after_all` right after its last, while
    later scopes' tests are still to run (not when the run ends): the engine tells a scope's last
    test without awaiting anything (`Scopes.left`) and runs its hooks only then."""
    log = tmp_path / "log.jsonl"
    write_eval(
        "s.eval.py",
        f"""
        import json
        from agent_health import test, describe, before_all, after_all

        def note(x):
            with open({str(log)!r}, "a") as f:
                f.write(json.dumps(x) + "\\n")

        @after_all
        def file_done(): note("file after_all")

        with describe("a"):
            @before_all
            def a_start(): note("a before_all")
            @after_all
            def a_done(): note("a after_all")
            @test("one")
            async def a1(): note("a one")
            @test("two")
            async def a2(): note("a two")

        with describe("b"):
            @before_all
            def b_start(): note("b before_all")
            @after_all
            def b_done(): note("b after_all")
            @test("one")
            async def b1(): note("b one")
    """,
    )
    res = run_dir(tmp_path / "evals", concurrency=1)
    assert {r.status for r in res.values()} == {"passed"}
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines == [
        "a before_all",
        "a one",
        "a two",
        "a after_all",
        "b before_all",
        "b one",
        "b after_all",
        "file after_all",
    ]


def test_a_judge_the_body_forgot_to_await_is_still_recorded(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test

        @test("forgot await", prompt="payment service failing")
        async def forgot(agent, judge):
            r = await agent.run()
            judge(r, "talks about quantum chromodynamics")

        @test("or_throw without await", prompt="payment service failing")
        async def no_await(agent, judge):
            r = await agent.run()
            judge(r, "payment service").or_throw()
    """,
    )
    res = run_dir(tmp_path / "evals")
    assert res["forgot await"].status == "failed" and res["forgot await"].signals[0].kind == "judge"
    assert res["or_throw without await"].status == "errored"
    assert "must be awaited first" in res["or_throw without await"].error


def test_sync_bodies_run_up_to_the_concurrency_at_once(write_eval, tmp_path):
    src = [
        "import threading, time",
        "from agent_health import test",
        "lock = threading.Lock()",
        "state = {'now': 0, 'peak': 0}",
        "",
        "def body():",
        "    with lock:",
        "        state['now'] += 1; state['peak'] = max(state['peak'], state['now'])",
        "    time.sleep(0.05)",
        "    with lock:",
        "        state['now'] -= 1",
        "    assert state['peak'] <= 16",
        "",
    ]
    for i in range(32):
        src.append(f"test('t{i:02d}')(lambda: body())")
    src += ["", "@test('peak')", "def peak():", "    time.sleep(0.3)", "    assert state['peak'] == 16, state"]
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "threads.eval.py").write_text("\n".join(src) + "\n")
    res = run_dir(tmp_path / "evals", concurrency=16)
    assert res["peak"].status == "passed", res["peak"].error


def test_analyzers_past_the_timeout_keep_what_finished_and_say_so(write_eval, tmp_path):
    """The analyses run under the test's timeout, armed only once an analyzer waits (the built-in
    ones finish at once): a synthesizer that never answers is cut off, and the result keeps the
    metric signals the analyzer before it added."""
    import asyncio

    from agent_health import define_config

    write_eval(
        "s.eval.py",
        """
        from agent_health import test, expect

        @test("t", prompt="Diagnose why the payment service is failing.")
        async def t(agent):
            expect(await agent.run()).to_have_called_tool("search_logs")
    """,
    )

    async def never(_: object) -> dict[str, object]:
        await asyncio.sleep(60)
        return {}

    tests = load_tests([tmp_path / "evals"]).tests
    res, _ = run_engine(tests, config=define_config(insights=never), timeout_s=0.5)
    r = res["t"]
    assert r.status == "passed" and r.metrics["analysis_error"] == "analyzers did not finish within 0.5s"
    assert r.metrics["traces"]["status"] == "ok"  # the trace metrics analyzer had finished
    res, _ = run_engine(tests, timeout_s=0.5)  # nothing waits: no error
    assert "analysis_error" not in res["t"].metrics and "traces" in res["t"].metrics
