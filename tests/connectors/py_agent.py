"""Python function agents for the tests (imported by the python connector as module:function)."""

import asyncio

from agent_health.model import RunResult, Step, Usage

CALLS: list[dict] = []


def sync_agent(prompt, context, run_id):
    CALLS.append({"prompt": prompt, "run_id": run_id})
    return f"sync answer to {prompt} with {len(context)} context items"


async def async_agent(prompt, provisioned):
    await asyncio.sleep(0)
    return {
        "response": f"async answer to {prompt}",
        "toolCalls": [{"name": "lookup", "args": provisioned}],
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


def full_agent(prompt, run_id):
    return RunResult(
        output="full",
        run_id=run_id,
        trajectory=(
            Step(kind="tool_call", tool="t", args={}, call_id="1"),
            Step(kind="tool_result", tool="t", call_id="1", content="r"),
            Step(kind="message", content="full"),
        ),
        usage=Usage.of(1, 1, model="py-model"),
    )


def broken_agent(prompt):
    raise RuntimeError("vector store offline")


async def slow_agent(prompt):
    await asyncio.sleep(5)
    return "late"


def hooked_before(request, agent_request):
    request["json"]["provisioned_token"] = agent_request.provisioned.get("ticket")
    request["headers"]["x-ticket"] = str(agent_request.provisioned.get("ticket"))
    return request


SEEN: list = []


def hooked_after(raw, result):
    SEEN.append(raw["status"])
    return result.model_copy(update={"output": result.output + " [after]"})


def short_agent(prompt):
    """Answers 200 characters, whatever the prompt's length."""
    return {"response": "x" * 200, "toolCalls": [{"name": "lookup", "args": {"q": "y" * 30}}]}
