"""Conversations inside one `agent.run()`, through the real run path, with real agents on 127.0.0.1:
an OpenAI-compatible chat agent over REST (it is sent the message history), a REST agent with its
own sessions (a session id the request template carries), an AG-UI agent (one thread, the messages
so far) and python callables (the history, or a session object). Each is driven by scripted turns
and by a simulated user (a model on a scripted OpenAI-compatible server, and the offline demo
policy); every turn is recorded, and a strict replay makes no request at all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_health import RunSettings, define_config, load_tests, rejudge, run_tests
from agent_health.stores import LocalResultStore, ResultKey
from tests.connectors import chat_agents
from tests.connectors.chat_agents import ChatAgents, agent_settings
from tests.judges.helpers import NONCE, ScriptedServer, chat
from tests.support import skip_or_fail

AGENTS = ("chat@v1", "sess@v1", "agui@v1", "py@v1", "py@session")

EVALS = """
from agent_health import SimulatedUser, expect, test

@test("scripted", prompt="My parcel never arrived.")
async def scripted(agent):
    def follow_up(so_far):
        # a turn computed from the conversation so far
        return f"Did you get it? You answered {len(so_far.turns)} time(s)."

    result = await agent.run(turns=["It was order 1234.", follow_up])
    expect(len(result.turns)).to_equal(3)

@test("simulated")
async def simulated(agent):
    result = await agent.run(user=SimulatedUser(
        persona="a customer whose parcel is late",
        goal="get the agent to confirm order 1234 is being looked into",
        facts=["it was due on Monday", "the order number is 1234"],
        opening="My parcel never arrived.",
        max_turns=4,
    ))
    expect(result).to_reach_goal()
"""


@pytest.fixture(scope="module")
def agents() -> Iterator[ChatAgents]:
    try:
        srv = ChatAgents()
    except (OSError, RuntimeError) as exc:
        skip_or_fail(f"cannot start the conversational agents on 127.0.0.1: {exc}")
    yield srv
    srv.close()


def user_model_reply(rec: Any) -> Any:
    """The simulated user's model: opening, then the order number, then the due date; its goal is
    reached once the agent was told both (three answers)."""
    prompt = rec.json["messages"][-1]["content"]
    answers = prompt.count("\nAGENT: ")
    if answers >= 3:
        turn = {"nonce": NONCE, "status": "goal_reached", "message": ""}
    else:
        say = ["My parcel never arrived.", "The order number is 1234.", "It was due on Monday."][answers]
        turn = {"nonce": NONCE, "status": "continue", "message": say}
    return chat(json.dumps(turn), usage=(200, 20), model=rec.json["model"])


@pytest.fixture(scope="module")
def user_model() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    server.default = user_model_reply
    yield server
    server.close()


def project(root: Path, url: str, judge: dict[str, Any] | None = None) -> Any:
    (root / "evals").mkdir(exist_ok=True)
    (root / "evals" / "chat.eval.py").write_text(EVALS)
    return define_config(root=str(root), state_dir="state", agents=agent_settings(url), judge=judge or {})


def run_all(root: Path, config: Any, replay: str, *, no_cache: bool = False) -> dict[tuple[str, str], Any]:
    loaded = load_tests([root / "evals"])
    assert not loaded.errors, loaded.errors
    settings = RunSettings(agents=AGENTS, replay=replay, concurrency=4, store=None)
    if no_cache:
        settings = settings.model_copy(update={"judge": settings.judge.model_copy(update={"cache": False})})
    return {(r.agent, r.name): r for r in run_tests(loaded.tests, config, settings=settings)}


def recordings(root: Path) -> list[Path]:
    return sorted((root / "state" / "recordings").rglob("*.json"))


def test_scripted_and_model_simulated_conversations_reach_each_agent_and_replay_strictly(tmp_path, agents, user_model):
    judge = {"provider": "openai", "model": "user-model", "settings": {"base_url": user_model.url + "/v1"}}
    config = project(tmp_path, agents.url, judge)
    before, model_before = agents.total(), len(user_model.posts())
    chat_agents.PYTHON_CALLS.clear()
    results = run_all(tmp_path, config, "record")
    for key, r in results.items():
        assert r.status == "passed", (key, r.error, [s.reasoning for s in r.signals if s.passed is False])

    # the chat agent is sent the whole history each turn, the context with the first message
    chat = results["chat@v1", "scripted"].run
    assert [t.user for t in chat.turns] == [
        "My parcel never arrived.",
        "It was order 1234.",
        "Did you get it? You answered 2 time(s).",
    ]
    assert chat.turns[2].output.startswith("[5 messages] you said 'Did you get it?")
    assert "first you said 'My parcel never arrived.'" in chat.output
    assert chat.output == chat.turns[-1].output and chat.conversation.ended == "script_done"
    bodies = [b for b in agents.requests["/v1/chat/completions"] if "Did you get it" in json.dumps(b)]
    assert [m["role"] for m in bodies[0]["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    # usage and latency per turn, summed over the run
    assert [t.usage.input_tokens for t in chat.turns] == [10, 30, 50] and chat.usage.input_tokens == 90
    assert chat.duration_ms == pytest.approx(sum(t.duration_ms for t in chat.turns))
    # a turn is a run of its own for the matchers: its user message opens it, its answer is its output
    second = chat.turn(2)
    assert second.trajectory[0].role == "user" and second.trajectory[0].content == "It was order 1234."
    assert second.output == chat.turns[1].output and second.usage.input_tokens == 30

    # the session agent gives a session id, and the request template carries it back
    sess = results["sess@v1", "scripted"].run
    assert sess.output.startswith("session sess-") and sess.output.endswith(
        "heard: My parcel never arrived. | It was order 1234. | Did you get it? You answered 2 time(s)."
    )
    # the AG-UI agent: one thread, a run per turn, the messages so far
    agui = results["agui@v1", "scripted"].run
    threads = {t.output.split()[1] for t in agui.turns}
    runs = [t.output.split()[3].rstrip(":") for t in agui.turns]
    assert len(threads) == 1 and len(set(runs)) == 3
    assert [t.output.split(": ")[1].split(" messages")[0] for t in agui.turns] == ["1", "3", "5"]
    # python: called per turn with the history, or keeping state in its session object
    assert results["py@v1", "scripted"].run.output == (
        "turn 3: you said 'Did you get it? You answered 2 time(s).'; before that "
        "['My parcel never arrived.', 'It was order 1234.']"
    )
    assert results["py@session", "scripted"].run.output.startswith("noted 3: My parcel never arrived. / It was")

    # the simulated user played by the model: it reached its goal after three answers
    for agent in AGENTS:
        sim = results[agent, "simulated"]
        conv = sim.run.conversation
        assert (conv.mode, conv.ended, conv.goal_reached, conv.turns_to_goal) == ("simulated", "goal_reached", True, 3)
        assert [t.user for t in sim.run.turns] == [
            "My parcel never arrived.",
            "The order number is 1234.",
            "It was due on Monday.",
        ]
        assert conv.user_model == "openai:user-model" and conv.user_calls == 3
        assert sim.judge_usage.input_tokens == 600  # the user's model calls count with the judges'
        assert sim.metrics["turns"] == 3 and sim.metrics["goal_reached"] is True
    # each agent was asked three turns in each test: the REST and AG-UI ones over HTTP, python in process
    assert agents.total() - before == 3 * 6 and chat_agents.PYTHON_CALLS == {"history": 6, "session": 6}
    assert len(user_model.posts()) - model_before == 5 * 3  # each user decision once (the opening is given)
    assert len(recordings(tmp_path)) == 5 * (3 + 3 + 3)  # every turn, and each user decision

    # strict replay: every turn and every user decision from the recordings; nothing is asked
    before, model_before = agents.total(), len(user_model.posts())
    chat_agents.PYTHON_CALLS.clear()
    replayed = run_all(tmp_path, config, "strict", no_cache=True)
    assert agents.total() == before and len(user_model.posts()) == model_before and not chat_agents.PYTHON_CALLS
    for key, r in replayed.items():
        assert r.status == "passed" and r.run.replayed, key
        assert [(t.user, t.output) for t in r.run.turns] == [(t.user, t.output) for t in results[key].run.turns]
        assert all(t.replayed for t in r.run.turns)
        assert r.judge_usage.total_tokens == 0  # replayed decisions spent nothing now


def test_the_offline_demo_policy_plays_the_user_with_every_agent(tmp_path, agents):
    config = project(tmp_path, agents.url)
    before = agents.total()
    chat_agents.PYTHON_CALLS.clear()
    results = run_all(tmp_path, config, "record")
    for agent in AGENTS:
        sim = results[agent, "simulated"].run
        # the agents never confirm the order, so the demo user reveals its facts one by one and gives up
        assert sim.conversation.ended == "gave_up" and sim.conversation.goal_reached is False
        assert sim.conversation.user_model == "demo:simulated-user/1" and sim.conversation.user_calls == 0
        # the chat agent asked "Which order is it?": the demo user answers with the fact closest to
        # the question; the others asked nothing and hear the facts in their order
        facts = ["the order number is 1234", "it was due on Monday"]
        assert [t.user for t in sim.turns] == [
            "My parcel never arrived.",
            *(facts if agent == "chat@v1" else facts[::-1]),
        ]
    assert agents.total() - before == 3 * 6 and chat_agents.PYTHON_CALLS == {"history": 6, "session": 6}
    assert len(recordings(tmp_path)) == 5 * (3 + 3 + 3)  # every turn, and each decision of the demo user

    before = agents.total()
    chat_agents.PYTHON_CALLS.clear()
    replayed = run_all(tmp_path, config, "strict")
    assert agents.total() == before and not chat_agents.PYTHON_CALLS
    assert all(r.run.replayed and r.status == results[k].status for k, r in replayed.items())


def test_an_agent_that_cannot_converse_refuses_naming_it(tmp_path, agents):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "chat.eval.py").write_text(EVALS)
    config = define_config(
        root=str(tmp_path),
        state_dir="state",
        agents=[
            {"key": "shot", "connector": "python", "settings": {"function": chat_agents.one_shot_agent}},
            {
                "key": "tpl",
                "connector": "http",
                "settings": {"endpoint": agents.url + "/session", "body_template": {"message": "{{prompt}}"}},
            },
        ],
    )
    loaded = load_tests([tmp_path / "evals"])
    settings = RunSettings(agents=("shot@default", "tpl@default"), store=None)
    results = run_tests(loaded.tests, config, settings=settings)
    assert {r.status for r in results} == {"errored"}
    for r in results:
        assert f"agent {r.agent} (" in r.error and "cannot hold a conversation" in r.error
    shot = next(r for r in results if r.agent == "shot@default")
    assert "takes none of messages, history, session, conversation_id" in shot.error
    tpl = next(r for r in results if r.agent == "tpl@default")
    assert "body_template carries none of {{messages}}" in tpl.error


def test_the_users_model_calls_are_cached_and_held_against_the_cost_cap_like_a_judges(tmp_path, agents, user_model):
    judge = {"provider": "openai", "model": "user-model", "settings": {"base_url": user_model.url + "/v1"}}
    config = project(tmp_path, agents.url, judge)
    loaded = [t for t in load_tests([tmp_path / "evals"]).tests if t.case.name == "simulated"]
    settings = RunSettings(agents=("py@session",), store=None)
    asked = len(user_model.posts())
    (first,) = run_tests(loaded, config, settings=settings)
    assert len(user_model.posts()) == asked + 3 and first.run.conversation.user_calls == 3
    # the same conversation again (no replay: the agent runs again): every decision from the judge cache
    (again,) = run_tests(loaded, config, settings=settings)
    assert len(user_model.posts()) == asked + 3
    assert again.status == "passed" and again.run.conversation.user_calls == 0 and again.judge_usage.total_tokens == 0

    # a test cap the user's next call would pass: the call is not made, the test errors naming why
    capped = define_config(
        root=str(tmp_path),
        state_dir="state",
        agents=agent_settings(agents.url),
        judge={**judge, "cache": False},
        prices={"user-model": (1000.0, 1000.0), "py-model": (0.0, 0.0)},
    )
    (tmp_path / "evals" / "chat.eval.py").write_text(
        EVALS.replace('@test("simulated")', '@test("simulated", max_cost_usd=0.5)')
    )
    loaded = [t for t in load_tests([tmp_path / "evals"]).tests if t.case.name == "simulated"]
    (refused,) = run_tests(loaded, capped, settings=settings)
    assert len(user_model.posts()) == asked + 3
    assert refused.status == "errored"
    assert "the simulated user (openai:user-model) could not answer after turn 1: SpendRefused" in refused.error
    assert "past its cap of $0.5" in refused.error


def test_rejudging_a_conversation_replays_it_whole_without_the_agent_or_the_user(tmp_path, agents):
    config = project(tmp_path, agents.url)
    store = LocalResultStore(tmp_path / "results")
    loaded = load_tests([tmp_path / "evals"]).tests
    chat_agents.PYTHON_CALLS.clear()
    stored = run_tests(loaded, config, settings=RunSettings(agents=("py@session",), store=None))
    for r in stored:
        store.put(r)
    assert chat_agents.PYTHON_CALLS["session"] == 6
    outcome = rejudge(stored, config, source="py@session", store=store)
    assert outcome.run is not None and outcome.run.stored == 2 and outcome.skipped == ()
    assert chat_agents.PYTHON_CALLS["session"] == 6  # never called again
    for r in stored:
        after = store.get(ResultKey.of(r))
        assert after.eval_run_id == outcome.run.run.id and len(after.judgements) == 1
        assert after.run.turns == r.run.turns and after.run.conversation == r.run.conversation


def test_the_connectors_doc_example_holds_the_conversation_with_each_agent(tmp_path, agents, monkeypatch):
    from agent_health import load_config
    from tests.core.test_docs_examples import block

    monkeypatch.setenv("CHAT_AGENT_URL", agents.url)
    (tmp_path / "agent_health_config.py").write_text(block("connectors.md", "# agent_health_config.py: four agents"))
    (tmp_path / "my_agents.py").write_text(block("connectors.md", "# my_agents.py"))
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "chat.eval.py").write_text(
        "from agent_health import test\n\n"
        '@test("three turns", prompt="My parcel never arrived.")\n'
        "async def three(agent):\n"
        '    await agent.run(turns=["It was order 1234.", "It was due on Monday."])\n'
    )
    config = load_config(tmp_path / "agent_health_config.py")
    refs = ("support-chat@default", "support-rest@default", "support-agui@default", "support-py@default")
    results = run_tests(load_tests([tmp_path / "evals"]).tests, config, settings=RunSettings(agents=refs, store=None))
    out = {r.agent.split("@")[0]: r.run.output for r in results if r.status == "passed"}
    assert out["support-chat"].startswith("[5 messages] you said 'It was due on Monday.'")
    assert out["support-rest"].endswith("heard: My parcel never arrived. | It was order 1234. | It was due on Monday.")
    assert "5 messages, you said 'It was due on Monday.'" in out["support-agui"]
    assert out["support-py"] == (
        "turn 3: you said 'It was due on Monday.' after ['My parcel never arrived.', 'It was order 1234.']"
    )
