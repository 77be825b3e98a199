"""Benchmark: the whole pipeline through Dagster against the CLI, on the same tests (issue 32).

    python benchmarks/dagster_headless.py [--tests 1000] [--repeat 3]

N fixed-answer tests (a data file; a python agent that returns one fixed answer, no judge) for one
agent version, each command in a fresh project folder:

- `agent-health run` of the file (results stored, the default);
- the headless Dagster job (`python -m agent_health_dagster.headless --agents fixed@v1`) on a new
  local instance (SQLite): registering the partitions, the evaluation run, one refresh run;
- the same headless job again on that instance (partitions registered: a re-evaluation, what the
  nightly schedule or a backfill does).

The commands alternate, `--repeat` times, so drift in the machine's load hits each; the medians of
wall seconds and CPU seconds (the process and its children) are printed, with the ratio of each
Dagster figure to the CLI's (target: the headless job at most 12x the CLI). The evaluation run's own
share is printed beside: how much of the job is Dagster's recording of N partitions."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

AGENT = """
def run(request):
    return {"output": "the payment-service cannot reach db-primary"}
"""
CONFIG = """
from agent_health import AgentSpec, define_config
config = define_config(
    agents=[AgentSpec(key="fixed", connector="python", settings={"function": "fixed_agent:run"}, versions={"v1": {}})],
    default_agent="fixed@v1",
)
"""


def write_project(folder: Path, n: int) -> Path:
    (folder / "evals").mkdir(parents=True)
    cases = [{"name": f"case {i:05d}", "prompt": "Why is the payment service failing?"} for i in range(n)]
    (folder / "evals" / "fixed.json").write_text(json.dumps({"tests": cases}))
    (folder / "fixed_agent.py").write_text(AGENT)
    (folder / "agent_health_config.py").write_text(CONFIG)
    return folder


@dataclass
class Timed:
    wall: float
    cpu: float
    out: str


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> Timed:
    """Wall and CPU seconds (user + system of the process and everything it started) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(wall, cpu, done.stdout)


def evaluation_seconds(out: str) -> float | None:
    """The evaluation run's wall seconds as the headless job prints them ("evaluating ... 12.3s")."""
    for line in out.splitlines():
        if "evaluating" in line and line.rstrip().endswith(")"):
            return float(line.split("...")[1].split("s (")[0])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ah-headless-"))
    python = sys.executable
    cli = str(Path(python).parent / "agent-health")
    figures: dict[str, list[Timed]] = {"cli": [], "headless": [], "headless again": []}
    evaluation: dict[str, list[float]] = {"headless": [], "headless again": []}
    print(f"{args.tests} fixed-answer tests, one version; load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    try:
        for i in range(args.repeat):
            folder = write_project(base / f"p{i}", args.tests)
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join([str(ROOT), str(folder)]),
                "AGENT_HEALTH_CONFIG": str(folder / "agent_health_config.py"),
                "PYTHONWARNINGS": "ignore",
            }
            figures["cli"].append(timed([cli, "run", "evals/fixed.json", "--agent", "fixed@v1"], folder, env))
            home = folder / "dagster_home"
            job = [python, "-m", "agent_health_dagster.headless", "--agents", "fixed@v1", "--dagster-home", str(home)]
            for name in ("headless", "headless again"):
                t = timed(job, folder, env)
                figures[name].append(t)
                seconds = evaluation_seconds(t.out)
                if seconds is not None:
                    evaluation[name].append(seconds)
            print(
                f"  round {i + 1}: "
                + ", ".join(f"{k} {v[-1].wall:.2f} s wall / {v[-1].cpu:.2f} s CPU" for k, v in figures.items()),
                flush=True,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    wall = {k: statistics.median(t.wall for t in v) for k, v in figures.items()}
    cpu = {k: statistics.median(t.cpu for t in v) for k, v in figures.items()}
    print(f"\nmedians of {args.repeat} (load at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}):")
    print(f"{'':16} {'wall s':>8} {'CPU s':>8} {'wall / CLI':>11} {'CPU / CLI':>10} {'evaluation run s':>17}")
    for k in figures:
        ev = statistics.median(evaluation[k]) if evaluation.get(k) else None
        print(
            f"{k:16} {wall[k]:>8.2f} {cpu[k]:>8.2f} {wall[k] / wall['cli']:>10.1f}x {cpu[k] / cpu['cli']:>9.1f}x"
            + (f" {ev:>17.2f}" if ev is not None else "")
        )
    ratio = wall["headless"] / wall["cli"]
    print(f"target: the headless job at most 12x the CLI: {ratio:.1f}x, {'met' if ratio <= 12 else 'missed'}")


if __name__ == "__main__":
    main()
