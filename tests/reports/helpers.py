"""Results and stores for the report and comparison tests, built the way the engine builds them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_health.model import EvalRun, RunSummary, TestResult, TrialResult
from agent_health.stores import LocalResultStore


def result(tid: str, status: str = "passed", agent: str = "demo@v1", suite: str = "s", **kw: Any) -> TestResult:
    return TestResult(
        test_id=f"{suite}::{tid}",
        name=tid,
        suite=suite,
        source_file=f"{suite}.eval.py",
        agent=agent,
        status=status,
        **kw,
    )


def epochs(tid: str, passed: int, failed: int, agent: str = "demo@v1", **kw: Any) -> TestResult:
    """A test run with epochs: it passes only when every graded trial passed (the engine's rule)."""
    statuses = ["passed"] * passed + ["failed"] * failed
    trials = tuple(TrialResult(epoch=i, status=s, score=1.0 if s == "passed" else 0.0) for i, s in enumerate(statuses))  # type: ignore[arg-type]
    return result(
        tid,
        "failed" if failed else "passed",
        agent,
        epochs=len(statuses),
        trials=trials,
        pass_at_k=float(passed > 0),
        pass_hat_k=float(failed == 0),
        flaky=bool(passed and failed),
        **kw,
    )


def store_run(store: LocalResultStore, run_id: str, results: Iterable[TestResult], started_at: float = 1.0) -> EvalRun:
    """Write `results` to `store` as one finished run, as the CLI does."""
    results = [r.model_copy(update={"eval_run_id": run_id}) for r in results]
    agents = tuple(dict.fromkeys(r.agent for r in results))
    run = EvalRun(id=run_id, transport="cli", started_at=started_at, agents=agents, tests=len(results))
    store.put_run(run)
    for r in results:
        store.put(r)
    summaries = tuple(RunSummary.of(a, [r for r in results if r.agent == a]) for a in agents)
    done = run.model_copy(update={"status": "finished", "finished_at": started_at + 1, "summaries": summaries})
    store.put_run(done)
    return done


class CountingAgent:
    """A real REST agent on 127.0.0.1 (the `http` connector's default shape) that counts its calls:
    it answers every prompt with the payment-outage diagnosis and one `search_logs` tool call."""

    ANSWER = "The payment service cannot reach its database db-primary:5432 (connection refused)."

    def __init__(self) -> None:
        import json
        import threading

        from tests.support import LocalHTTPServer, QuietHandler

        self.calls = 0
        self.headers: list[dict[str, str]] = []
        lock = threading.Lock()
        agent = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                with lock:
                    agent.calls += 1
                    agent.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = {
                    "response": f"{agent.ANSWER} (asked: {body.get('prompt', '')[:40]})",
                    "toolCalls": [
                        {"id": "c1", "name": "search_logs", "args": {"service": "payment"}, "result": "ERROR refused"}
                    ],
                    "usage": {"input_tokens": 40, "output_tokens": 12},
                    "model": "sre-agent-1",
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = LocalHTTPServer(Handler).start()
        self.url = self.server.url + "/chat"

    def close(self) -> None:
        self.server.close()
