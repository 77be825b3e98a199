"""Engine and CLI performance with the demo agent (issue 9 targets), printed as ratios in one run.

- whole CLI process time (start to exit, the default summary reporter, results stored as usual)
  for 200 and 1,000 zero-latency tests;
- 1,000 zero-latency tests against inspect_ai running an equivalent 1,000-sample task on its
  `mockllm/model` in the same run (install `inspect-ai` into the venv for this line; it is not a
  project dependency);
- engine overhead per test (in-process, zero latency, minus the bare agent calls);
- 200 tests x 200 ms at concurrency 8 and 1,000 tests x 200 ms at concurrency 64, engine and
  whole process, as ratios to ideal;
- peak memory (max RSS) of the whole CLI process for 1,000 tests and for 10,000 tests at
  concurrency 64.

Usage: python benchmarks/engine.py [--quick]   (--quick skips the 1,000 x 200 ms and 10,000 runs)
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

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


def timed_process(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """Wall seconds, exit code and max RSS (KiB) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, os.waitstatus_to_exitcode(status), usage.ru_maxrss


def cli_run(path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """One `agent-health run` process, its results stored under a fresh state folder."""
    shutil.rmtree(path.parent / ".agent_health", ignore_errors=True)
    return timed_process([sys.executable, "-m", "agent_health", "run", str(path), *args], path.parent, env)


INSPECT_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

PROMPTS = ["Diagnose why the payment service is failing.", "checkout p99 latency is high",
           "kafka consumer lag on orders", "logs-ingest disk full"]

@task
def bench():
    return Task(
        dataset=[Sample(input=PROMPTS[i % 4], target="") for i in range({n})],
        solver=[generate()],
        scorer=includes(),
    )
"""


def inspect_run(folder: Path, n: int) -> tuple[float, int] | None:
    """Wall seconds and exit code of `inspect eval` on an n-sample mockllm task, or None."""
    inspect = Path(sys.executable).with_name("inspect")
    if not inspect.exists():
        return None
    task = folder / "inspect_bench.py"
    task.write_text(textwrap.dedent(INSPECT_TASK.replace("{n}", str(n))))
    logs = folder / "inspect-logs"
    shutil.rmtree(logs, ignore_errors=True)
    cmd = [str(inspect), "eval", task.name, "--model", "mockllm/model", "--display", "none", "--log-dir", str(logs)]
    t, code, _ = timed_process(cmd, folder)
    return t, code


def _settings(concurrency: int) -> Any:
    from agent_health import RunSettings

    return RunSettings(agents=("demo@v2",), concurrency=concurrency, store=None)


def engine_wall(path: Path, concurrency: int) -> float:
    """In-process seconds of the run function alone (no interpreter start, imports or loading)."""
    from agent_health import load_config, load_tests, run_evaluation

    config = load_config(cwd=path.parent)
    tests = load_tests([path]).tests
    t0 = time.perf_counter()
    asyncio.run(run_evaluation(tests, config, _settings(concurrency)))
    return time.perf_counter() - t0


def engine_overhead(path: Path, n: int) -> float:
    """Milliseconds per test spent in the run path beyond the agent call itself."""
    from agent_health import load_config, load_tests
    from agent_health.model.agent import AgentRequest
    from agent_health.session import build_runtime

    config = load_config(cwd=path.parent)
    tests = load_tests([path]).tests

    async def bare_time() -> float:
        runtime = build_runtime(config, "demo@v2")
        t0 = time.perf_counter()
        for t in tests:
            await runtime.invoke(AgentRequest(prompt=t.case.prompt or ""))
        return time.perf_counter() - t0

    engine_wall(path, 8)  # warm-up
    e, b = engine_wall(path, 8), asyncio.run(bare_time())
    return (e - b) / n * 1000


def main() -> None:
    quick = "--quick" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "evals"
        s200, s1000 = write_suite(folder, 200), write_suite(folder, 1000)
        load = os.getloadavg()[0]
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {load:.1f} at the start")

        t, code, _ = cli_run(s200)
        print(f"CLI 200 tests, 0 ms agent:            {t:6.2f} s  (target <= 0.8 s, exit {code})")
        t1000, code, rss = cli_run(s1000)
        print(f"CLI 1,000 tests, 0 ms agent:          {t1000:6.2f} s  (target <= 1.5 s, exit {code})")
        print(f"peak memory, CLI 1,000 tests:         {rss / 1024:6.1f} MB (target <= 100 MB)")
        t1000_ns, code, _ = cli_run(s1000, "--no-store")
        print(f"CLI 1,000 tests, 0 ms, --no-store:    {t1000_ns:6.2f} s  (the store's share: {t1000 - t1000_ns:.2f} s)")
        found = inspect_run(Path(tmp), 1000)
        if found is None:
            print("inspect_ai, 1,000 mockllm samples:    not installed (pip install inspect-ai into the venv)")
        else:
            ti, code = found
            print(
                f"inspect_ai, 1,000 mockllm samples:    {ti:6.2f} s  (exit {code}); agent-health / inspect_ai "
                f"= {t1000 / ti:.3f} x (target <= 0.3); with --no-store {t1000_ns / ti:.3f} x"
            )
        print(f"engine overhead per test:             {engine_overhead(s1000, 1000):6.3f} ms (target <= 0.5 ms)")

        lat = {"AGENT_HEALTH_DEMO_LATENCY_MS": "200"}
        os.environ.update(lat)
        cases = [(s200, 200, 8, 1.06)] + ([] if quick else [(s1000, 1000, 64, 1.15)])
        for suite, n, conc, target in cases:
            ideal = n / conc * 0.2
            t, code, _ = cli_run(suite, "--concurrency", str(conc), env=lat)
            e = engine_wall(suite, conc)
            print(
                f"{n:>5} x 200 ms, concurrency {conc:<3} engine {e:6.2f} s = {e / ideal:.3f} x ideal {ideal:.3f} s; "
                f"whole CLI process {t:6.2f} s = {t / ideal:.3f} x (target <= {target}, exit {code})"
            )
        del os.environ["AGENT_HEALTH_DEMO_LATENCY_MS"]
        if not quick:
            s10000 = write_suite(folder, 10000)
            t, code, rss = cli_run(s10000, "--concurrency", "64")
            print(
                f"peak memory, CLI 10,000 tests, c=64:  {rss / 1024:6.1f} MB (target <= 150 MB; {t:.1f} s, exit {code})"
            )
        print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
