"""Checks that need no agent at all (pure data tests), next to agent tests that use test.extend
fixtures with async setup and teardown."""

import asyncio

from agent_health import expect, test

RUNBOOK = {
    "payment-service": {"owner": "payments", "slo_ms": 300, "dependencies": ["db-primary", "fraud-api"]},
    "checkout-service": {"owner": "storefront", "slo_ms": 800, "dependencies": ["redis", "catalog-db"]},
}


@test("every service in the runbook has an owner and an SLO", labels=["category:Data"])
def runbook_complete():
    for entry in RUNBOOK.values():
        expect.soft(entry).to_contain("owner")
        expect(entry["slo_ms"]).to_be_greater_than(0)


async def seeded_ticket():
    """Async generator fixture: a ticket exists before the agent runs and is closed after."""
    await asyncio.sleep(0)
    ticket = {"id": "INC-4242", "status": "open", "service": "payment-service"}
    yield ticket
    ticket["status"] = "closed"


it = test.extend(ticket=seeded_ticket)


@it("triage uses the seeded ticket", labels=["category:Triage"])
async def triage(agent, judge, ticket):
    result = await agent.run(f"Triage ticket {ticket['id']}: the payment service is failing with db errors.")
    expect(result).to_have_called_tool("search_logs")
    await judge(result, "names the payment-service database connection problem")
