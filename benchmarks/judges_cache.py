"""Judge cost-control benchmark: how fast a cache hit is, and what a warm rerun saves.

Run: /work/main/.venv/bin/python benchmarks/judges_cache.py [--judgements 200] [--latency-ms 50]

Starts an OpenAI-compatible stub on 127.0.0.1 that answers after `--latency-ms` (a stand-in for a
real model), judges N distinct claims cold (empty cache), then again warm (new service, as after a
restart), and prints wall time, provider calls and per-judgement cost of each pass, plus raw
SQLite cache get/put timings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_health.config.model import JudgeSettings
from agent_health.judges.base import JudgeRequest
from agent_health.judges.cache import LocalJudgeCache, cache_key
from agent_health.judges.service import JudgeService
from agent_health.model import RunResult, Step


def stub_server(latency_s: float) -> tuple[ThreadingHTTPServer, list[int]]:
    calls = [0]

    def answer(request: bytes) -> bytes:
        # a judge echoes the nonce its prompt asks for
        found = re.search(rb'\\"nonce\\": \\"([0-9a-f]{16})\\"', request)
        verdict = {"nonce": found.group(1).decode() if found else "", "pass": True, "score": 0.9, "reasoning": "ok"}
        return json.dumps(
            {
                "choices": [{"message": {"role": "assistant", "content": json.dumps(verdict)}}],
                "usage": {"prompt_tokens": 900, "completion_tokens": 60},
                "model": "bench-judge",
            }
        ).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            body = answer(self.rfile.read(int(self.headers.get("content-length") or 0)))
            calls[0] += 1
            time.sleep(latency_s)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, calls


def requests(n: int) -> list[JudgeRequest]:
    out = []
    for i in range(n):
        steps = tuple(
            Step(kind="tool_result", tool="search_logs", content=f"line {j} " * 40, call_id=str(j)) for j in range(20)
        )
        run = RunResult(
            output=f"Answer {i}: the database is down. " * 20,
            trajectory=steps,
            run_id=f"r{i}",
            prompt="Diagnose the outage.",
        )
        out.append(JudgeRequest(criteria=f"claim number {i} holds", run=run, output=run.output))
    return out


async def judge_pass(settings: JudgeSettings, state: Path, reqs: list[JudgeRequest]) -> tuple[float, int, int]:
    service = JudgeService.from_settings(settings, state_path=state)
    t0 = time.perf_counter()
    verdicts = await asyncio.gather(*(service.judge(r) for r in reqs))
    wall = time.perf_counter() - t0
    await service.aclose()
    assert not any(v.errored for v in verdicts), [v.error for v in verdicts if v.errored][:1]
    return wall, sum(v.cached for v in verdicts), sum(v.usage.total_tokens for v in verdicts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--judgements", type=int, default=200)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()

    httpd, calls = stub_server(args.latency_ms / 1000)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    settings = JudgeSettings(
        provider="openai", model="bench-judge", settings={"base_url": url}, concurrency=args.concurrency
    )
    reqs = requests(args.judgements)
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        cold = asyncio.run(judge_pass(settings, state, reqs))
        cold_calls = calls[0]
        warm = asyncio.run(judge_pass(settings, state, reqs))
        warm_calls = calls[0] - cold_calls
        n = args.judgements
        print(
            f"judge cache, {n} judgements, provider latency {args.latency_ms:g} ms, judge concurrency "
            f"{args.concurrency}"
        )
        print(
            f"  cold: {cold[0]:.3f} s wall, {cold_calls} provider calls, {cold[2]} judge tokens, "
            f"{cold[0] / n * 1000:.2f} ms/judgement"
        )
        print(
            f"  warm: {warm[0]:.3f} s wall, {warm_calls} provider calls, {warm[2]} judge tokens, "
            f"{warm[1]}/{n} cached, {warm[0] / n * 1000:.3f} ms/judgement (incl. key hashing)"
        )

        cache = LocalJudgeCache(state / "raw.sqlite")
        value = {"passed": True, "score": 0.9, "reasoning": "x" * 400, "details": {"k": list(range(20))}}
        keys = [cache_key(i=i) for i in range(2000)]
        puts, gets = [], []
        for k in keys:
            t0 = time.perf_counter()
            cache.put(k, "verdict", value)
            puts.append(time.perf_counter() - t0)
        for k in keys:
            t0 = time.perf_counter()
            cache.get(k)
            gets.append(time.perf_counter() - t0)
        cache.close()
        q = lambda xs, p: sorted(xs)[int(len(xs) * p) - 1] * 1e6  # noqa: E731
        print(
            f"  sqlite put: median {statistics.median(puts) * 1e6:.0f} us, p99 {q(puts, 0.99):.0f} us; "
            f"get: median {statistics.median(gets) * 1e6:.0f} us, p99 {q(gets, 0.99):.0f} us (2000 ops)"
        )
    httpd.shutdown()


if __name__ == "__main__":
    main()
