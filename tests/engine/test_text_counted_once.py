"""A run's text is counted once a test: the connector counts it (to tell whether its secrets are
searched on the loop or piece by piece in a worker thread), the count follows the run out of the
runtime with the user's prompt added, and the engine's check of the finished result reads it
instead of walking the run's steps and events again (about 2% of a fixed-answer test's
instructions)."""

from __future__ import annotations

import asyncio

import agent_health.model.run as run_module
from agent_health import RunSettings, define_config, load_tests, run_evaluation
from agent_health.model.run import SCRUB_INLINE_CHARS, text_chars, text_over
from agent_health.reporters.base import CallbackReporter
from tests.connectors.servers import invoke, runtime

SHORT = "tests.connectors.py_agent:short_agent"  # 200 characters, whatever the prompt


def counting_walks(monkeypatch) -> list[int]:
    """Count the walks through a run's JSON-like values (its steps' arguments, raw events, context)."""
    walks: list[int] = []
    real = run_module._text_chars

    def walk(value, budget):
        walks.append(1)
        return real(value, budget)

    monkeypatch.setattr(run_module, "_text_chars", walk)
    return walks


def test_the_count_leaves_the_runtime_with_the_run_and_is_its_true_count(monkeypatch):
    run = invoke(runtime("python", function=SHORT), "p" * 500)
    walks = counting_walks(monkeypatch)
    known = text_chars(run)
    assert walks == []  # read from the run, not counted again
    assert known == text_chars(run.model_copy()) and walks  # a copy forgets it: counted afresh, the same
    assert known >= 500 + 200 + 30  # the prompt's step, the answer, the tool call's argument


def test_the_users_prompt_added_by_the_runtime_is_counted():
    """The agent's own run is small; with a prompt of nearly the limit first in its trajectory it
    is over it, so its result is scrubbed in a worker thread, piece by piece."""
    prompt = "p" * (SCRUB_INLINE_CHARS - 100)
    run = invoke(runtime("python", function=SHORT), prompt)
    assert run.trajectory[0].content == prompt and run.output == "x" * 200
    assert text_over([run]) and text_over([run.model_copy()])
    small = invoke(runtime("python", function=SHORT), "p" * 100)
    assert not text_over([small])


def test_a_run_is_walked_once_a_test(tmp_path, write_eval, monkeypatch):
    write_eval(
        "counted.eval.py",
        """
        from agent_health import test

        for i in range(20):
            @test(f"t{i:02d}", prompt="Why is the payment service failing?")
            async def t(agent):
                await agent.run()
        """,
    )
    config = define_config(
        root=str(tmp_path),
        agents=[
            {
                "key": "py",
                "connector": "python",
                "settings": {"function": SHORT},
                "versions": {"v1": {}},
            }
        ],
        default_agent="py@v1",
    )
    alone = invoke(runtime("python", function=SHORT), "q")
    per_run = counting_walks(monkeypatch)
    text_chars(alone.model_copy())  # the walks one count of such a run makes
    walks_a_count = len(per_run)
    per_run.clear()
    results = []
    asyncio.run(
        run_evaluation(
            load_tests([tmp_path / "evals"]).tests,
            config,
            RunSettings(judge={"skip": True}),
            reporters=[CallbackReporter(results.append)],
        )
    )
    assert len(results) == 20 and {r.status for r in results} == {"passed"}
    assert walks_a_count >= 1 and len(per_run) == 20 * walks_a_count  # the connector's count only
