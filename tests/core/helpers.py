"""Run eval source through the real loader and engine, in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_health import Engine, EngineOptions, TestResult, load_config, load_tests
from agent_health.judges.service import JudgeService
from agent_health.session import build_runtime


def run_engine(
    tests, agent: str = "demo@v2", judges: JudgeService | None = None, **options
) -> tuple[dict[str, TestResult], Engine]:
    async def main():
        engine = Engine(build_runtime(load_config(), agent), judges, EngineOptions(**options))
        out = {}
        async for r in engine.run(tests):
            out[r.name] = r
        await engine.aclose()
        return out, engine

    return asyncio.run(main())


def run_dir(path: Path, agent: str = "demo@v2", judges: JudgeService | None = None, **options) -> dict[str, TestResult]:
    loaded = load_tests([path])
    assert not loaded.errors, loaded.errors
    return run_engine(loaded.tests, agent, judges, **options)[0]
