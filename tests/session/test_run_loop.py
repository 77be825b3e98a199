"""The engine's loop is run one way, `agent_health.session.run_loop` (a RunLoop, which test code
cannot stop), by every transport: no other module of the library or the Dagster layer starts an
event loop of its own (`agent-health serve`'s web server, which runs no test, aside)."""

from __future__ import annotations

import re

from tests.conftest import ROOT

OWN_LOOP = re.compile(r"asyncio\.run\(|asyncio\.Runner\(|run_until_complete\(|new_event_loop\(|\bRunner\(loop_factory")
ALLOWED = {"agent_health/session/process.py", "agent_health/reporters/serve.py"}


def test_only_run_loop_starts_an_event_loop():
    starts = {
        path.relative_to(ROOT).as_posix()
        for package in ("agent_health", "agent_health_dagster")
        for path in (ROOT / package).rglob("*.py")
        if OWN_LOOP.search(path.read_text())
    }
    assert starts <= ALLOWED, starts - ALLOWED
    process = (ROOT / "agent_health" / "session" / "process.py").read_text()
    assert len(OWN_LOOP.findall(process)) == 1  # in run_loop, which run_owned calls too
