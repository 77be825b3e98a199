"""Conversations with the demo SRE agent: scripted turns, and a simulated on-call engineer.

Shows: `agent.run(turns=[...])` with a turn computed from the conversation so far, matchers on the
whole conversation and on one turn (`to_ask_before_acting`, `result.turn(2)`), a simulated user
(`SimulatedUser`: persona, goal, facts) that the offline demo policy plays, and conversation-level
judges. `demo@v2` asks about a vague report before it acts and keeps what it was told; `demo@v1`
acts at once and reads only the latest message, so it fails all three.
"""

from agent_health import ConversationGoal, KnowledgeRetention, SimulatedUser, TurnsToGoal, expect, test

VAGUE = "Something is broken in production, can you help?"


@test("asks which service before investigating a vague report", labels=["category:Conversation"], prompt=VAGUE)
async def clarify_first(agent, judge):
    result = await agent.run(turns=["It is the payment service: card payments fail since 14:00 UTC."])
    expect(result).to_ask_before_acting()
    expect(result.turn(2)).to_have_called_tool("search_logs", args={"service": "payment-service"})
    await judge(result, "identifies that the payment service cannot reach its database")


def fix_please(so_far):
    """The engineer asks for the fix once the agent named a root cause, and ends the conversation otherwise."""
    return "What should we change to fix it?" if "root cause" in so_far.output.lower() else None


@test(
    "answers a follow-up from the diagnosis it gave",
    labels=["category:Conversation"],
    prompt="Checkout p99 latency jumped to 4s. Find the root cause.",
)
async def follow_up(agent, judge):
    result = await agent.run(turns=[fix_please])
    expect(len(result.turns)).to_equal(2)
    expect(result.turn(2)).not_.to_have_called_tool("search_logs")  # it answers from what it found
    await judge(result, "recommends reverting the TTL change")
    await judge.observe(result, KnowledgeRetention())


@test("a simulated on-call engineer learns why checkout is slow", labels=["category:Conversation"])
async def simulated_engineer(agent, judge):
    result = await agent.run(
        user=SimulatedUser(
            persona="an on-call engineer in a hurry who answers questions in a few words",
            goal="learn that the redis cache hit ratio dropped",
            facts=["checkout p99 latency is 4 seconds", "it started at 09:15 after a config change"],
            opening=VAGUE,
            max_turns=4,
        )
    )
    expect(result).to_reach_goal(within_turns=3)
    await judge(result, ConversationGoal())
    await judge.observe(result, TurnsToGoal(max_turns=2))
