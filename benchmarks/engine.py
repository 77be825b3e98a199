"""Engine and CLI performance with the demo agent (issue 2 targets).

Prints, in one run on this machine:
- whole CLI process time (start to exit) for 200 and 1,000 zero-latency tests;
- engine overhead per test (in-process, zero latency, minus the bare agent calls);
- 200 tests x 200 ms at concurrency 8 and 1,000 tests x 200 ms at concurrency 64, as ratios to ideal;
- peak memory (max RSS) of the CLI process for 1,000 tests.

Usage: python benchmarks/engine.py [--quick]
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def write_suite(folder: Path, n: int) -> Path:
    lines = [
        "from agent_health import test, expect",
        "",
        "PROMPTS = ['Diagnose why the payment service is failing.', 'checkout p99 latency is high',",
        "           'kafka consumer lag on orders', 'logs-ingest disk full']",
        "",
        f"for i in range({n}):",
        "    @test(f'bench {i:05d}', prompt=PROMPTS[i % 4], labels=['bench'])",
        "    async def body(agent):",
        "        r = await agent.run()",
        "        expect(r).to_have_called_tool('search_logs')",
        "        expect(r.output).to_contain('')",
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"bench{n}.eval.py"
    path.write_text("\n".join(lines) + "\n")
    return path


def cli_run(path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """Wall seconds, exit code and max RSS (KiB) of one CLI process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_health", "run", str(path), *args],
        cwd=path.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, os.waitstatus_to_exitcode(status), usage.ru_maxrss


def engine_overhead(path: Path, n: int) -> float:
    """Milliseconds per test spent in the engine beyond the agent call itself."""
    from agent_health import load_config, load_tests
    from agent_health.model.agent import AgentRequest
    from agent_health.session import build_runtime, engine_options, open_engine

    config = load_config(cwd=path.parent)
    tests = load_tests([path]).tests

    async def engine_time() -> float:
        engine = open_engine(config, "demo@v2", engine_options(config, concurrency=8))
        t0 = time.perf_counter()
        async for _ in engine.run(tests):
            pass
        return time.perf_counter() - t0

    async def bare_time() -> float:
        runtime = build_runtime(config, "demo@v2")
        t0 = time.perf_counter()
        for t in tests:
            await runtime.invoke(AgentRequest(prompt=t.case.prompt or ""))
        return time.perf_counter() - t0

    asyncio.run(engine_time())  # warm-up
    e, b = asyncio.run(engine_time()), asyncio.run(bare_time())
    return (e - b) / n * 1000


def engine_wall(path: Path, concurrency: int) -> float:
    """In-process seconds for the engine alone (no interpreter start, imports or loading)."""
    from agent_health import load_config, load_tests
    from agent_health.session import engine_options, open_engine

    config = load_config(cwd=path.parent)
    tests = load_tests([path]).tests

    async def go() -> float:
        engine = open_engine(config, "demo@v2", engine_options(config, concurrency=concurrency))
        t0 = time.perf_counter()
        async for _ in engine.run(tests):
            pass
        return time.perf_counter() - t0

    return asyncio.run(go())


def main() -> None:
    quick = "--quick" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "evals"
        s200, s1000 = write_suite(folder, 200), write_suite(folder, 1000)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores")
        t, code, _ = cli_run(s200)
        print(f"CLI 200 tests, 0 ms agent:            {t:6.2f} s  (target <= 0.8 s, exit {code})")
        t, code, rss = cli_run(s1000)
        print(f"CLI 1,000 tests, 0 ms agent:          {t:6.2f} s  (target <= 1.5 s, exit {code})")
        print(f"peak memory, 1,000 tests:             {rss / 1024:6.1f} MB (target <= 120 MB)")
        print(f"engine overhead per test:             {engine_overhead(s1000, 1000):6.3f} ms (target <= 0.5 ms)")
        lat = {"AGENT_HEALTH_DEMO_LATENCY_MS": "200"}
        os.environ.update(lat)
        cases = [(s200, 8, 5.0, 1.06)] + ([] if quick else [(s1000, 64, 1000 / 64 * 0.2, 1.15)])
        for suite, conc, ideal, target in cases:
            n = 200 if suite is s200 else 1000
            t, code, _ = cli_run(suite, "--concurrency", str(conc), env=lat)
            e = engine_wall(suite, conc)
            print(
                f"{n:>5} x 200 ms, concurrency {conc:<3} engine {e:6.2f} s = {e / ideal:.3f} x ideal {ideal:.3f} s; "
                f"whole CLI process {t:6.2f} s = {t / ideal:.3f} x (target <= {target})"
            )


if __name__ == "__main__":
    main()
