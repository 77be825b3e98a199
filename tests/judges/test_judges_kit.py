"""Judges a test author writes in one line, through the CLI (`agent-health run` on real eval files):
`judge(result, [...])`, `expect(...).to_satisfy_judge(...)`, the named judges and `create_judge`.
The LLM judge is a scripted OpenAI-compatible server on 127.0.0.1; it answers each prompt with the
verdict its criteria ask for (`{pass 0.9}`, `{fail 0.1}`), echoing the prompt's nonce."""

from __future__ import annotations

import re

import pytest

from agent_health.model import RunReport
from tests.support.cli import cli_in_process

from .helpers import ScriptedServer, chat, strings, verdict_json

CONFIG = """
from agent_health import define_config

config = define_config(
    state_dir="state",
    prices={{"judge-model": (1.0, 2.0)}},
    judge={{"provider": "openai", "model": "judge-model", "backoff_s": 0.01, "cache": False,
            "settings": {{"base_url": "{url}/v1"}}}},
)
"""

EVALS = """
from pydantic import BaseModel

from agent_health import Factuality, StructuredOutputJudge, ToolCallJudge, create_judge, expect, test

PROMPT = "Diagnose why the payment service is failing."


@test("criteria list", prompt=PROMPT)
async def criteria_list(agent, judge):
    result = await agent.run()
    verdicts = await judge.observe(result, ["names the database {pass 0.9}", "mentions the weather {fail 0.1}"])
    expect([v.passed for v in verdicts]).to_equal([True, False])


@test("criteria list gates", prompt=PROMPT)
def criteria_list_sync(agent, judge):
    verdicts = judge(agent.run(), ["names the database {pass 0.9}", "mentions the weather {fail 0.1}"])
    expect(len(verdicts)).to_equal(2)


@test("matcher hard", prompt=PROMPT)
async def matcher_hard(agent):
    result = await agent.run()
    await expect(result).to_satisfy_judge("mentions the weather {fail 0.1}")
    expect("never").to_equal("reached")


@test("matcher soft", prompt=PROMPT)
async def matcher_soft(agent):
    result = await agent.run()
    await expect.soft(result).to_satisfy_judge("mentions the weather {fail 0.1}")
    expect("reached").to_equal("reached")


@test("matcher threshold", prompt=PROMPT)
async def matcher_threshold(agent):
    result = await agent.run()
    await expect(result).to_satisfy_judge("names the root cause {pass 0.6}", threshold=0.5)
    await expect.soft(result).to_satisfy_judge("names the root cause {pass 0.6}", threshold=0.8)


@test("matcher sync", prompt=PROMPT)
def matcher_sync(agent):
    verdict = expect(agent.run()).to_satisfy_judge("names the database {pass 0.9}")
    expect(verdict.score).to_equal(0.9)


@test("tool calls", prompt=PROMPT)
async def tool_calls(agent, judge):
    result = await agent.run()
    await judge(result, ToolCallJudge(
        ["search_logs", {"name": "get_metrics", "args": {"service": "payment-service"}}, "query_traces"]
    ))
    await judge.observe(result, ToolCallJudge(["query_traces", "search_logs", "refund"]))
    await judge.observe(result, ToolCallJudge([{"name": "search_logs", "args": {"level": "debug"}}]))
    await expect(result).to_satisfy_judge(ToolCallJudge(["search_logs", "refund"]), threshold=0.5)


class Rca(BaseModel):
    service: str
    root_cause: str
    confidence: float


@test("structured output", prompt=PROMPT + " Answer in JSON.")
async def structured(agent, judge):
    result = await agent.run()
    await expect(result).to_satisfy_judge(
        StructuredOutputJudge(Rca, expected={"service": "payment-service", "confidence": lambda c: c > 0.8})
    )
    await judge.observe(result, StructuredOutputJudge({"type": "object", "required": ["ticket_id"]}))
    await judge.observe(result, StructuredOutputJudge(expected={"service": "checkout", "confidence": 0.85}))


@test("factuality", prompt=PROMPT)
async def factuality(agent, judge):
    result = await agent.run()
    await judge(result, Factuality(expected="The payment service cannot reach db-primary:5432. {pass 0.8}"))
    await judge.observe(result, Factuality(expected="The cache is full. {fail 0.2}"))


def refund_tools(expected_tools, tool_calls):
    ok = all(i < len(tool_calls) and tool_calls[i]["name"] == name for i, name in enumerate(expected_tools))
    return {"score": 1.0 if ok else 0.0, "metadata": {"rationale": "Expected " + " -> ".join(expected_tools)}}


RefundToolJudge = create_judge("RefundToolJudge", refund_tools)


@test("custom judge", prompt=PROMPT)
async def custom(agent, judge):
    result = await agent.run()
    await judge(result, RefundToolJudge(expected_tools=["search_logs", "get_metrics"]))
    await judge.observe(result, RefundToolJudge(expected_tools=["lookup_order", "refund"]))


@test("custom judge without its option", prompt=PROMPT)
async def custom_missing(agent, judge):
    await judge(await agent.run(), RefundToolJudge)
"""

SUITE = """
from agent_health import ToolCallJudge, describe, expect, test, use_judges

use_judges("stays on the incident {pass 0.7}")

PROMPT = "Diagnose why the payment service is failing."

with describe("triage", judges=[ToolCallJudge(["search_logs", "get_metrics"])]):

    @test("judged", prompt=PROMPT)
    async def judged(agent):
        expect(await agent.run()).to_have_called_tool("search_logs")

    @test("opted out", prompt=PROMPT, suite_judges=False)
    async def opted_out(agent):
        await agent.run()

    @test("stopped body", prompt=PROMPT)
    async def stopped(agent):
        expect(await agent.run()).to_have_called_tool("refund")
        expect("never").to_equal("reached")


@test("no agent run")
def no_run():
    expect(1).to_equal(1)
"""

_ASKED = re.compile(r"\{(pass|fail) ([0-9.]+)\}")


def answer(rec):
    """The verdict the criteria in the prompt ask for."""
    text = "\n".join(strings(rec.json))
    m = _ASKED.search(text)
    assert m, "a prompt without a scripted verdict: " + text[:300]
    return chat(verdict_json(m.group(1) == "pass", float(m.group(2)), f"scripted {m.group(0)}"), usage=(1000, 100))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    server = ScriptedServer()
    server.default = answer
    root = tmp_path_factory.mktemp("kit")
    (root / "agent_health_config.py").write_text(CONFIG.format(url=server.url))
    (root / "evals").mkdir()
    (root / "evals" / "kit.eval.py").write_text(EVALS)
    (root / "evals" / "suite.eval.py").write_text(SUITE)
    try:
        p = cli_in_process(
            "run",
            "evals",
            "--no-store",
            "--reporter",
            "json=out.json",
            cwd=root,
            env={"AGENT_HEALTH_DEMO_LATENCY_MS": "0"},
        )
        assert p.returncode in (0, 1), p.stdout + p.stderr
        prompts = ["\n".join(strings(r.json)) for r in server.posts()]
        yield RunReport.model_validate_json((root / "out.json").read_text()), prompts
    finally:
        server.close()


def result(report, name):
    (found,) = [r for r in report[0].results if r.name == name]
    return found


def judged(r):
    return [s for s in r.signals if s.kind == "judge"]


def test_a_list_of_criteria_gives_one_verdict_and_one_signal_each(report):
    observed = result(report, "criteria list")
    assert observed.status == "passed"  # observe verdicts never gate; the body saw both, in order
    signals = judged(observed)
    assert [(s.name, s.role, s.passed, s.score) for s in signals] == [
        ("judge('names the database {pass 0.9}')", "observe", True, 0.9),
        ("judge('mentions the weather {fail 0.1}')", "observe", False, 0.1),
    ]
    gated = result(report, "criteria list gates")  # a sync body gets the list directly
    assert gated.status == "failed" and [s.passed for s in judged(gated)] == [True, False]
    assert gated.judge_usage.input_tokens == 2000  # both calls are counted


def test_to_satisfy_judge_gates_like_expect(report):
    hard = result(report, "matcher hard")
    assert hard.status == "failed"
    (only,) = [s for s in hard.signals if s.kind in ("judge", "deterministic")]  # the body stopped there
    assert only.name == "to_satisfy_judge('mentions the weather {fail 0.1}')" and only.passed is False
    assert only.score == 0.1 and "scripted {fail 0.1}" in only.reasoning
    assert only.evidence["actual"] == {"passed": False, "score": 0.1, "reasoning": "scripted {fail 0.1}"}
    assert only.evidence["usage"]["input_tokens"] == 1000 and hard.judge_usage.input_tokens == 1000
    assert hard.cost_usd is not None and hard.cost_usd > (1000 * 1.0 + 100 * 2.0) / 1e6

    soft = result(report, "matcher soft")
    assert soft.status == "failed"
    matcher, reached = [s for s in soft.signals if s.kind in ("judge", "deterministic")]
    assert matcher.soft and matcher.passed is False and reached.passed is True  # recorded and went on


def test_to_satisfy_judge_threshold_and_sync_body(report):
    r = result(report, "matcher threshold")
    assert r.status == "failed"
    assert [(s.name, s.passed, s.score) for s in judged(r)] == [
        ("to_satisfy_judge('names the root cause {pass 0.6}', threshold=0.5)", True, 0.6),
        ("to_satisfy_judge('names the root cause {pass 0.6}', threshold=0.8)", False, 0.6),
    ]
    sync = result(report, "matcher sync")
    assert sync.status == "passed", sync.error  # the verdict came back directly, with its score


def test_tool_call_judge_is_deterministic_with_partial_credit(report, request):
    r = result(report, "tool calls")
    assert r.status == "passed", r.error
    full, out_of_order, wrong_args, matcher = judged(r)
    assert full.passed is True and full.score == 1.0 and full.role == "gate"
    assert full.name.startswith("judge(\"ToolCallJudge(expected=['search_logs', {'name': 'get_metrics'")
    assert out_of_order.passed is False and out_of_order.score == pytest.approx(1 / 3)  # in order: only query_traces
    assert "search_logs not called in order" in out_of_order.reasoning and "refund not called" in out_of_order.reasoning
    assert wrong_args.score == 0.5 and "expected {'level': 'debug'}" in wrong_args.reasoning  # called, other args
    assert matcher.passed is True and matcher.score == 0.5
    assert full.evidence["provenance"]["provider"] == "python" and full.evidence["evaluator"] == "ToolCallJudge"
    assert r.judge_usage.total_tokens == 0
    assert not [p for p in report[1] if "ToolCallJudge" in p or "search_logs', 'refund" in p]  # no model asked


def test_structured_output_judge_checks_the_schema_then_fields(report):
    r = result(report, "structured output")
    assert r.status == "passed", r.error
    fits, missing, fields = judged(r)
    assert fits.passed is True and fits.score == 1.0 and "2/2 expected fields match" in fits.reasoning
    assert (
        missing.passed is False and missing.score == 0.0 and "'ticket_id' is a required property" in missing.reasoning
    )
    assert fields.score == 0.5 and "service: got 'payment-service'" in fields.reasoning
    assert r.judge_usage.total_tokens == 0 and not [p for p in report[1] if "StructuredOutputJudge" in p]


def test_factuality_asks_the_judge_model_with_the_reference_answer(report):
    r = result(report, "factuality")
    assert r.status == "passed", r.error
    good, bad = judged(r)
    assert good.passed is True and good.score == 0.8 and bad.passed is False and bad.role == "observe"
    assert good.evidence["provenance"]["evaluator"] == "Factuality"
    assert good.evidence["provenance"]["model"] == "judge-model"
    asked = [p for p in report[1] if "db-primary:5432. {pass 0.8}" in p]
    assert len(asked) == 1 and "Reference answer: The payment service cannot reach" in asked[0]
    assert "<<<UNTRUSTED OUTPUT" in asked[0]  # the agent's output is fenced, as for judge()
    assert r.judge_usage.input_tokens == 2000


def test_create_judge_makes_a_custom_judge_with_options(report):
    r = result(report, "custom judge")
    assert r.status == "passed", r.error
    good, bad = judged(r)
    assert good.passed is True and good.score == 1.0 and good.evidence["evaluator"] == "RefundToolJudge"
    assert good.reasoning == "Expected search_logs -> get_metrics"
    assert bad.passed is False and bad.reasoning == "Expected lookup_order -> refund"
    assert good.evidence["provenance"]["definition_hash"] != bad.evidence["provenance"]["definition_hash"]

    missing = result(report, "custom judge without its option")
    assert missing.status == "errored"
    assert "RefundToolJudge" in missing.error and "['expected_tools'] are not given" in missing.error


def test_suite_judges_run_on_every_test_after_the_body_each_as_its_own_signal(report):
    file_judge = ("judge('stays on the incident {pass 0.7}')", True, 0.7)
    block_judge = ("judge(\"ToolCallJudge(expected=['search_logs', 'get_metrics'])\")", True, 1.0)
    judged_ = result(report, "triage > judged")
    assert judged_.status == "passed", judged_.error
    assert [s.kind for s in judged_.signals if s.kind != "metric"] == ["deterministic", "judge", "judge"]
    assert [(s.name, s.passed, s.score) for s in judged(judged_)] == [file_judge, block_judge]
    assert all(s.role == "gate" for s in judged(judged_))

    stopped = result(report, "triage > stopped body")  # a hard failure stops the body, not the suite judges
    assert stopped.status == "failed"
    assert [s.name for s in stopped.signals if s.kind == "deterministic"] == ["to_have_called_tool('refund')"]
    assert [(s.name, s.passed, s.score) for s in judged(stopped)] == [file_judge, block_judge]

    assert judged(result(report, "triage > opted out")) == []
    no_run = result(report, "no agent run")  # nothing to judge without a run
    assert no_run.status == "passed" and judged(no_run) == []


def test_the_eval_files_doc_example_runs_with_the_demo_agent_and_judge(tmp_path):
    from tests.core.test_docs_examples import block

    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "judged.eval.py").write_text(block("eval-files.md", "# evals/judged.eval.py"))
    p = cli_in_process(
        "run",
        "evals",
        "--agent",
        "demo@v2",
        "--no-store",
        "--reporter",
        "json=out.json",
        cwd=tmp_path,
        env={"AGENT_HEALTH_DEMO_LATENCY_MS": "0"},
    )
    assert p.returncode == 0, p.stdout + p.stderr
    results = {r.name: r for r in RunReport.model_validate_json((tmp_path / "out.json").read_text()).results}
    assert all(r.status == "passed" for r in results.values()), {n: r.error for n, r in results.items()}
    names = {n: [s.name for s in judged(r)] for n, r in results.items()}
    suite = "judge('names the payment service')"
    assert names["triage names the database"] == [
        "judge('names the database db-primary')",
        "judge('says connections are refused')",
        "to_satisfy_judge(\"Factuality(expected='The payment service cannot reach db-primary:5432.')\")",
        "to_satisfy_judge('blames the exhausted connection pool', threshold=0.5)",
        suite,
    ]
    assert names["tool use > checks the error logs, then traces"][1:] == [
        suite,
        "judge(\"ToolCallJudge(expected=['search_logs', 'get_metrics'])\")",
    ]
    assert len(names["structured RCA"]) == 1  # opted out of the file's judge
    custom = judged(results["custom judge"])[0]
    assert (
        custom.evidence["evaluator"] == "RefundToolJudge" and custom.reasoning == "Expected search_logs -> get_metrics"
    )


AGAIN = """
from agent_health import Factuality, Judge, StructuredOutputJudge, ToolCallJudge, expect, test

PROMPT = "Diagnose why the payment service is failing."


@test("factuality cached", prompt=PROMPT)
async def cached(agent, judge):
    await judge(await agent.run(), Factuality(expected="The payment service cannot reach db-primary:5432. {pass 0.8}"))


@test("negated matcher", prompt=PROMPT)
async def negated(agent):
    await expect(await agent.run()).not_.to_satisfy_judge("mentions the weather {fail 0.1}")


@test("forgotten await", prompt=PROMPT)
async def forgotten(agent):
    expect(await agent.run()).to_satisfy_judge("mentions the weather {fail 0.1}")


@test("bad tool call judge", prompt=PROMPT)
async def bad_tools(agent, judge):
    await judge(await agent.run(), ToolCallJudge([42]))


@test("bad schema", prompt=PROMPT)
async def bad_schema(agent, judge):
    await judge(await agent.run(), StructuredOutputJudge({"type": "strng"}))


@test("empty criteria list", prompt=PROMPT)
async def empty(agent, judge):
    await judge(await agent.run(), [])


class Short(Judge):
    name = "Short"

    def __init__(self, limit):
        super().__init__()
        self.limit = limit

    def options(self):
        return {"limit": self.limit}

    async def assess(self, ctx):
        return {"score": 1.0 if len(ctx.output) <= self.limit else 0.0, "reasoning": f"{len(ctx.output)} chars"}


@test("subclass judge", prompt=PROMPT)
async def subclass(agent, judge):
    await judge.observe(await agent.run(), Short(limit=10))
"""


def test_named_judges_share_the_cache_skip_mode_and_report_bad_input(tmp_path):
    server = ScriptedServer()
    server.default = answer
    (tmp_path / "agent_health_config.py").write_text(
        CONFIG.format(url=server.url).replace('"cache": False', '"cache": True')
    )
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "again.eval.py").write_text(AGAIN)
    env = {"AGENT_HEALTH_DEMO_LATENCY_MS": "0"}

    def run(*flags):
        p = cli_in_process("run", "evals", "--no-store", "--reporter", "json=out.json", *flags, cwd=tmp_path, env=env)
        assert p.returncode in (0, 1, 2), p.stdout + p.stderr
        report = RunReport.model_validate_json((tmp_path / "out.json").read_text())
        return {r.name: r for r in report.results}

    try:
        first = run()
        asked = len(server.posts())
        assert asked == 3  # Factuality, the negated matcher, the forgotten await: the errors asked nothing
        assert first["negated matcher"].status == "passed"
        (negated,) = judged(first["negated matcher"])
        assert negated.name.startswith("not_.to_satisfy_judge(") and negated.passed is True and negated.score == 0.1
        forgotten = first["forgotten await"]  # awaited after the body: recorded and gating all the same
        assert forgotten.status == "failed" and [s.passed for s in judged(forgotten)] == [False]
        for name, message in [
            ("bad tool call judge", "ToolCallJudge: an expected call is a tool name"),
            ("bad schema", "StructuredOutputJudge: invalid JSON schema at $.type"),
            ("empty criteria list", "the list of criteria is empty"),
        ]:
            assert first[name].status == "errored" and message in first[name].error, first[name].error

        (short,) = judged(first["subclass judge"])  # a documented Judge subclass, as create_judge's
        assert short.name == "judge('Short(limit=10)')" and short.passed is False and short.score == 0.0
        assert short.evidence["evaluator"] == "Short" and short.reasoning.endswith(" chars")
        assert first["subclass judge"].status == "passed"  # observe

        second = run()  # the same verdicts again: from the judge cache, no call, no cost
        assert len(server.posts()) == asked
        (fact,) = judged(second["factuality cached"])
        assert fact.cached and fact.passed and second["factuality cached"].judge_usage.total_tokens == 0

        skipped = run("--no-judge", "--no-cache")  # skip mode skips named judges and matchers, neutrally
        assert len(server.posts()) == asked
        assert skipped["factuality cached"].status == "passed" and skipped["forgotten await"].status == "passed"
        assert all(s.skipped for s in judged(skipped["forgotten await"]))
    finally:
        server.close()


def test_the_calibration_gate_leaves_deterministic_judges_gating(tmp_path):
    """With judge.calibration, an uncalibrated model's gate verdict only observes; a named judge
    that asked no model is a deterministic check with nothing to calibrate, so it still gates."""
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\n"
        'config = define_config(judge={"provider": "demo", "calibration": {"min_kappa": 0.6, "min_labels": 30}})\n'
    )
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "gate.eval.py").write_text(
        "from agent_health import ToolCallJudge, test\n\n"
        '@test("uncalibrated model", prompt="Diagnose why the payment service is failing.")\n'
        "async def model(agent, judge):\n"
        '    await judge(await agent.run(), "mentions the weather forecast")\n\n'
        '@test("deterministic", prompt="Diagnose why the payment service is failing.")\n'
        "async def deterministic(agent, judge):\n"
        '    await judge(await agent.run(), ToolCallJudge(["refund"]))\n'
    )
    p = cli_in_process(
        "run",
        "evals",
        "--no-store",
        "--reporter",
        "json=out.json",
        cwd=tmp_path,
        env={"AGENT_HEALTH_DEMO_LATENCY_MS": "0"},
    )
    assert p.returncode == 1, p.stdout + p.stderr
    results = {r.name: r for r in RunReport.model_validate_json((tmp_path / "out.json").read_text()).results}
    (observed,) = judged(results["uncalibrated model"])
    assert observed.role == "observe" and observed.passed is False and results["uncalibrated model"].status == "passed"
    (gating,) = judged(results["deterministic"])
    assert gating.role == "gate" and gating.passed is False and results["deterministic"].status == "failed"
    assert "calibration" not in gating.evidence


def test_suite_judges_count_in_the_content_hash_and_bad_ones_name_the_file(tmp_path):
    from agent_health import load_tests

    body = (
        "from agent_health import ToolCallJudge, describe, test, use_judges\n"
        "{judges}\n"
        '@test("a")\ndef a():\n    pass\n\n'
        '@test("b", suite_judges=False)\ndef b():\n    pass\n'
    )

    def hashes(judges):
        (tmp_path / "evals").mkdir(exist_ok=True)
        (tmp_path / "evals" / "h.eval.py").write_text(body.format(judges=judges))
        loaded = load_tests([tmp_path / "evals"])
        assert not loaded.errors, loaded.errors
        return {t.case.name: t.case.content_hash for t in loaded.tests}

    plain = hashes("")
    judged_once = hashes('use_judges(ToolCallJudge(["search_logs"]))')
    other = hashes('use_judges(ToolCallJudge(["get_metrics"]))')
    assert judged_once["a"] != plain["a"] and other["a"] != judged_once["a"]  # a changed judge re-runs its tests
    assert plain["b"] == judged_once["b"] == other["b"]  # the test that opted out keeps its hash

    (tmp_path / "evals" / "h.eval.py").write_text(body.format(judges='with describe("x", judges=[42]):\n    pass'))
    (error,) = load_tests([tmp_path / "evals"]).errors
    assert "h.eval.py" in str(error) and "a suite judge is a criteria string or a named judge, got 42" in str(error)
