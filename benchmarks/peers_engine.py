"""The engine against pydantic-evals (issue 32, item 3): the same N fixed-answer cases through
`agent-health run` and through pydantic-evals' `Dataset.evaluate_sync`, side by side in one run,
at 1,000 / 10,000 / 50,000 cases: CPU per test, peak RSS, and bytes per loaded test, with the
ratio ours / theirs.

What both run (the cheapest honest equivalent of each other):

- pydantic-evals: a `Dataset` of N `Case(name, inputs=<a prompt>, expected_output=<the answer>)`
  with the `EqualsExpected` evaluator, and an `async` task returning the fixed answer; the report
  (every case with its output and assertion) is built in memory, which is where pydantic-evals
  keeps results; its default concurrency (unbounded).
- agent-health: a JSON data file of N cases `{name, prompt, expected_tools: ["lookup"]}` run by
  `agent-health run FILE` against an agent on the `python` connector whose `async` function returns
  the same fixed answer with its one `lookup` tool call; each case's body runs the agent and checks
  the tool deterministically (`expect.soft(result).to_have_called_tool("lookup")`: one gate
  signal, like EqualsExpected's one assertion). Results are stored to local files as `run` does by
  default (the run's log and the suite's index, appended and fsynced once per batch), and reported by the default
  summary reporter; `--no-store` is measured too. Its default concurrency (8).
- agent-health with a key: the same stored run, the agent's settings given an API key from the
  environment (`kwargs: {api_key: {env: BENCH_API_KEY}}`), as most real agents are: every run and
  result is then searched for the key in each form it may take before anything leaves the engine.
  pydantic-evals has nothing to compare it with; it shows what a credential costs a test.

Every process is a fresh one, measured by wait4 (user + sys CPU seconds and peak RSS); this
process imports nothing but the standard library, since Linux keeps a process's peak RSS across
exec and a large parent would raise its children's.

- CPU per test: (CPU of the process at N cases - CPU of the same process at 1 case) / (N - 1):
  the start-up (interpreter, imports, configuration) is counted once, not per test, and each
  size gets a figure of its own, which is what the target names (at 10,000 and at 50,000). The
  slope between the two largest sizes is printed beside it as a check: it leaves out anything
  fixed, but moves more with the machine's load, being the difference of two large numbers.
- storing alone: the CPU a thread spends storing 3,000 results with `put_many` in batches of 64
  (as the run's sink hands them over), by the thread's own rusage: what a stored run pays that
  pydantic-evals, keeping its report in memory, does not.
- bytes per loaded test: the peak-RSS slope of loading only, between the two largest sizes:
  `agent-health run FILE --list` for ours (the tests are loaded and listed, nothing runs), and
  building the `Dataset` (cases and evaluator) then exiting for pydantic-evals.

The machine is shared: every figure is the median of --repeat runs, the runs of ours and theirs
alternating, and the ratios are of those medians; the load average is printed at the start and
the end. The stored CPU ratio is also given round by round (each round's own ratio, from the runs
of ours and theirs made seconds apart, then their median, lowest and highest): the machine's speed
drifts over a run by more than what is compared, and a round's two sides drift together. Each
other kind of ours measured gets its rounds' ratios too, against theirs (`--no-store`'s tells the
engine's own cost from the disk's, round by round). The
target counts as met only when both the ratio of the medians and the median of the rounds' ratios
are at most 1. --kinds runs only some of our kinds (`stored` is always run), for more rounds of
what the target measures in the same time. pydantic-evals is installed into a temporary
virtualenv (never the project's), or the one --venv names (created there when missing, kept).

    .venv/bin/python benchmarks/peers_engine.py [--sizes 1000,10000,50000] [--repeat 3]
        [--venv DIR] [--pydantic-evals 'pydantic-evals==X.Y'] [--tree DIR] [--baseline DIR] [--quick]
        [--kinds stored,no-store,secret]

--quick runs 200 / 1,000 / 2,000 cases once each. --tree DIR measures another checkout of
agent-health (for example `git worktree add /tmp/before <commit>`) with this interpreter;
--baseline DIR measures one more in the same rounds and adds its figures and now / before.

--instructions counts instructions instead of CPU seconds: every process runs under valgrind's
callgrind (the whole process, every thread; user space only, so what the kernel does for a
write or an fsync is not in it), once at 200 and once at 2,000 cases (or the two smallest
--sizes), and a test's share is the difference over the cases between. The count does not move
with the machine's load (two runs of the same code agree within about 1%), so it tells whether a
change to the engine made it cheaper where CPU seconds on a shared machine cannot; it is not
CPU time: an instruction of one program may cost more than another's (our count a test was
1.5-1.7x pydantic-evals' a case while our CPU seconds were 1.0-1.3x theirs: theirs touch more
memory), so compare ours with before, and CPU seconds with pydantic-evals.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANSWER = "The payment service cannot reach its database db-primary."
PROMPTS = [
    "Diagnose why the payment service is failing.",
    "checkout p99 latency is high",
    "kafka consumer lag on orders",
    "logs-ingest disk full",
]
TARGET_KB = 0.5  # bytes per loaded test, at most (issue 32)
CALLGRIND = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]

AGENT = f"""
ANSWER = {ANSWER!r}


async def answer(prompt, api_key=None):
    return {{"output": ANSWER, "tool_calls": [{{"name": "lookup", "args": {{"q": prompt}}}}]}}
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{"key": "fixed", "connector": "python", "settings": SETTINGS, "versions": {"v1": {}}}],
    default_agent="fixed@v1",
)
"""
SETTINGS = {"function": "fixed_agent:answer"}
# the same agent given an API key from the environment, as most real agents are: every result is
# then searched for the key in each form it may take (docs/deploy.md, Secrets)
SECRET_SETTINGS = {**SETTINGS, "kwargs": {"api_key": {"env": "BENCH_API_KEY"}}}
SECRET_ENV = {"BENCH_API_KEY": "sk-bench-0123456789abcdefABCDEF"}

# What storing costs on its own: a thread stores N results with put_many in batches of 64 (as the
# run's sink hands them over) into a fresh local store; its own CPU (RUSAGE_THREAD) a result,
# encoding each result included (in a run the engine's secrets check has encoded it already).
STORE_CPU = """
import resource, sys, tempfile, threading

from agent_health.model import RunResult, Step, TestResult
from agent_health.stores import LocalResultStore

n = int(sys.argv[1])
run = RunResult(output="x" * 60, run_id="r", trajectory=(Step(kind="tool_call", tool="lookup", args={"q": "p"}),))
results = [
    TestResult(test_id=f"cases::case-{i:05d}", name=f"case {i:05d}", suite="cases", source_file="cases.json",
               agent="fixed@v1", status="passed", run=run, eval_run_id="20261206T000000-abcdef01")
    for i in range(n)
]
spent = []


def store():
    s = LocalResultStore(tempfile.mkdtemp(dir=sys.argv[2]))
    before = resource.getrusage(resource.RUSAGE_THREAD)
    for i in range(0, n, 64):
        s.put_many(results[i : i + 64])
    after = resource.getrusage(resource.RUSAGE_THREAD)
    spent.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / n)


t = threading.Thread(target=store)
t.start()
t.join()
print(spent[0])
"""

# pydantic-evals' side: argv[1] the number of cases, argv[2] "run" or "load"
THEIRS = f"""
import sys

from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected

ANSWER = {ANSWER!r}
PROMPTS = {PROMPTS!r}


async def task(inputs: str) -> str:
    return ANSWER


n, what = int(sys.argv[1]), sys.argv[2]
dataset = Dataset(
    name="bench",
    cases=[Case(name=f"case {{i:05d}}", inputs=PROMPTS[i % 4], expected_output=ANSWER) for i in range(n)],
    evaluators=[EqualsExpected()],
)
if what == "run":
    report = dataset.evaluate_sync(task, progress=False)
    passed = sum(1 for case in report.cases if case.assertions and all(a.value for a in case.assertions.values()))
    print(f"passed {{passed}} of {{n}}")
    if passed != n:
        sys.exit(1)
"""


@dataclass
class Proc:
    cpu: float  # user + sys seconds
    rss_kib: int
    wall: float
    out: str  # stdout, then stderr


PREFIX: list[str] = []  # what every measured command runs under (CALLGRIND with --instructions)


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Proc:
    """One fresh process: its CPU seconds, peak RSS (wait4) and output; exits when it fails."""
    cmd = [*PREFIX, *cmd]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        out = proc.stdout.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = code = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        err.seek(0)
        said = err.read().decode(errors="replace")
        if code != 0:
            raise SystemExit(f"{' '.join(cmd)} (in {cwd}) exited {code}:\n{out[-2000:]}\n{said[-3000:]}")
    return Proc(usage.ru_utime + usage.ru_stime, usage.ru_maxrss, wall, out + said)


def instructions(p: Proc) -> int:
    """The instructions callgrind counted in the process `p` was."""
    found = re.search(r"Collected : (\d+)", p.out)
    if found is None:
        raise SystemExit(f"no instruction count in the output of a run under callgrind:\n{p.out[-2000:]}")
    return int(found.group(1))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min), {os.cpu_count()} cores"


# -- the two sides ---------------------------------------------------------------------------
def theirs_venv(folder: Path | None, spec: str) -> tuple[Path, str]:
    """A virtualenv with pydantic-evals (made and installed when missing): its python, and the
    installed version."""
    folder = folder or Path(tempfile.mkdtemp(prefix="peers-engine-venv-", dir="/tmp"))
    python = folder / "bin" / "python"
    if not python.exists():
        print(f"installing {spec} into {folder} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(folder)
        subprocess.run([str(python), "-m", "pip", "install", "-q", spec], check=True)
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('pydantic-evals'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return python, version


class Ours:
    """The case files, and a fresh project folder (the fixed agent and its configuration) for
    every run, so results are stored into empty folders as a first run's are."""

    name = "agent-health"

    def __init__(self, work: Path, tree: Path = ROOT):
        self.root = work / "ours"
        self.root.mkdir(parents=True)
        self.tree = tree  # the checkout measured
        self.count = 0

    def cases(self, n: int) -> Path:
        path = self.root / f"cases{n}.json"
        if not path.exists():
            cases = [
                {"name": f"case {i:05d}", "prompt": PROMPTS[i % 4], "expected_tools": ["lookup"]} for i in range(n)
            ]
            path.write_text(json.dumps(cases))
        return path

    def _cli(self, n: int, *args: str, secret: bool = False) -> Proc:
        self.count += 1
        project = self.root / f"p{self.count:04d}"
        project.mkdir()
        (project / "fixed_agent.py").write_text(AGENT.lstrip())
        settings = SECRET_SETTINGS if secret else SETTINGS
        (project / "agent_health_config.py").write_text(CONFIG.lstrip().replace("SETTINGS", repr(settings)))
        cmd = [sys.executable, "-m", "agent_health", "run", str(self.cases(n)), *args]
        return run(cmd, project, {"PYTHONPATH": str(self.tree), **(SECRET_ENV if secret else {})})

    def stored(self, n: int, secret: bool = False) -> Proc:
        """A run storing its results; with `secret`, of an agent given an API key (`SECRET_SETTINGS`)."""
        p = self._cli(n, secret=secret)
        if f"{n} result(s) stored" not in p.out:
            what = " with a key" if secret else ""
            raise SystemExit(f"agent-health stored run of {n} cases{what}: no '{n} result(s) stored' in its output")
        return p

    def with_secret(self, n: int) -> Proc:
        return self.stored(n, secret=True)

    def no_store(self, n: int) -> Proc:
        return self._cli(n, "--no-store")

    def loaded(self, n: int) -> Proc:
        return self._cli(n, "--list")

    def store_cpu(self, n: int = 3000) -> float:
        """ms of CPU a stored result, in the storing thread alone (`STORE_CPU`)."""
        cmd = [sys.executable, "-c", STORE_CPU, str(n), str(self.root)]
        return float(run(cmd, self.root, {"PYTHONPATH": str(self.tree)}).out.split()[0]) * 1000


class Theirs:
    name = "pydantic-evals"

    def __init__(self, work: Path, python: Path):
        self.root = work / "theirs"
        self.root.mkdir(parents=True)
        (self.root / "bench.py").write_text(THEIRS.lstrip())
        self.python = python

    def stored(self, n: int) -> Proc:  # the report in memory is where pydantic-evals keeps results
        p = run([str(self.python), "bench.py", str(n), "run"], self.root)
        if f"passed {n} of {n}" not in p.out:
            raise SystemExit(f"pydantic-evals run of {n} cases: {p.out!r}")
        return p

    def loaded(self, n: int) -> Proc:
        return run([str(self.python), "bench.py", str(n), "load"], self.root)


# what each kind of run of ours is called in the tables (pydantic-evals' one kind is its stored run)
KINDS = {"stored": "results stored", "no-store": "--no-store", "secret": "stored, agent given a key"}


# -- the table ------------------------------------------------------------------------------
def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", help="case counts (default 1000,10000,50000; with --instructions 200,2000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each figure, the median kept (default 3)")
    parser.add_argument("--venv", type=Path, help="pydantic-evals' virtualenv (made here when missing)")
    parser.add_argument("--pydantic-evals", default="pydantic-evals", help="what pip installs (default the newest)")
    parser.add_argument("--quick", action="store_true", help="200 / 1,000 / 2,000 cases, once each")
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"our kinds of CPU run (default {','.join(KINDS)}; stored always)"
    )
    parser.add_argument("--tree", type=Path, default=ROOT, help="the agent-health checkout to measure (default: this)")
    parser.add_argument("--baseline", type=Path, help="another checkout, measured in the same rounds (before)")
    parser.add_argument(
        "--instructions", action="store_true", help="instructions a test under callgrind, not CPU seconds (see above)"
    )
    opts = parser.parse_args()
    if opts.instructions:
        if shutil.which("valgrind") is None:
            parser.error("--instructions runs every process under valgrind, not installed (apt-get install valgrind)")
        count_instructions(opts, parser)
        return
    sizes = [200, 1000, 2000] if opts.quick else sorted(int(s) for s in (opts.sizes or "1000,10000,50000").split(","))
    repeat = 1 if opts.quick else max(1, opts.repeat)
    if len(sizes) < 2:
        parser.error("--sizes: at least two sizes (the loading slope is between the two largest)")
    kinds = {"stored", *(k.strip() for k in opts.kinds.split(",") if k.strip())}
    if kinds - set(KINDS):
        parser.error(f"--kinds: unknown {sorted(kinds - set(KINDS))}; known: {', '.join(KINDS)}")
    kinds_run = {k: v for k, v in KINDS.items() if k in kinds}
    python, version = theirs_venv(opts.venv, opts.pydantic_evals)
    print(f"python {sys.version.split()[0]}; pydantic-evals {version}; {load()} at the start", flush=True)
    with tempfile.TemporaryDirectory(prefix="peers-engine-") as tmp:
        theirs = Theirs(Path(tmp), python)
        sides = {"ours": Ours(Path(tmp) / "now", opts.tree.resolve())}
        if opts.baseline:
            sides["before"] = Ours(Path(tmp) / "before", opts.baseline.resolve())
        # CPU seconds and peak RSS (KiB) of every run, by (side, kind, size)
        cpu: dict[tuple[str, str, int], list[float]] = {}
        rss: dict[tuple[str, str, int], list[float]] = {}

        def measure(side: str, kind: str, n: int, fn: Callable[[int], Proc]) -> None:
            p = fn(n)
            cpu.setdefault((side, kind, n), []).append(p.cpu)
            rss.setdefault((side, kind, n), []).append(p.rss_kib)

        big = sizes[-2:]
        for r in range(repeat):
            for n in [1, *sizes]:  # every side in turn, size by size
                for name, ours in sides.items():
                    measure(name, "stored", n, ours.stored)
                    if name == "ours":
                        measure("theirs", "stored", n, theirs.stored)
                    if "no-store" in kinds_run:
                        measure(name, "no-store", n, ours.no_store)
                    if "secret" in kinds_run:
                        measure(name, "secret", n, ours.with_secret)
            for n in big:
                for name, ours in sides.items():
                    measure(name, "loaded", n, ours.loaded)
                measure("theirs", "loaded", n, theirs.loaded)
            for name, ours in sides.items():
                cpu.setdefault((name, "store-thread", 0), []).append(ours.store_cpu())
            print(f"  round {r + 1} of {repeat} done; {load()}", flush=True)

        def per_test(side: str, kind: str, n: int) -> float:
            """ms of CPU a test: the run at n minus the run of 1 case (the start-up)."""
            return (median(cpu[side, kind, n]) - median(cpu[side, kind, 1])) / (n - 1) * 1000

        def slope(table: dict[tuple[str, str, int], list[float]], side: str, kind: str) -> float:
            lo, hi = big
            return (median(table[side, kind, hi]) - median(table[side, kind, lo])) / (hi - lo)

        mine = list(sides)  # "ours", then "before" when measured
        rows: list[tuple[str, dict[str, float], float, str]] = []  # label, ours (and before), theirs, unit
        for n in sizes:
            for kind, what in kinds_run.items():
                ours_ms = {side: per_test(side, kind, n) for side in mine}
                rows.append((f"CPU per test, {n:,} cases ({what})", ours_ms, per_test("theirs", "stored", n), "ms"))
        lo, hi = big
        for kind, what in kinds_run.items():
            label = f"CPU slope {lo:,} to {hi:,} ({what})"
            ours_ms = {side: slope(cpu, side, kind) * 1000 for side in mine}
            rows.append((label, ours_ms, slope(cpu, "theirs", "stored") * 1000, "ms"))
        for n in sizes:
            mb = {side: median(rss[side, "stored", n]) / 1024 for side in mine}
            rows.append((f"peak RSS, {n:,} cases (stored run)", mb, median(rss["theirs", "stored", n]) / 1024, "MB"))
        for n in big:
            mb = {side: median(rss[side, "loaded", n]) / 1024 for side in mine}
            rows.append((f"peak RSS, loading {n:,} cases only", mb, median(rss["theirs", "loaded", n]) / 1024, "MB"))
        kb = {side: slope(rss, side, "loaded") for side in mine}  # KiB a test
        rows.append((f"bytes per loaded test (RSS slope {lo:,} to {hi:,})", kb, slope(rss, "theirs", "loaded"), "KB"))

        def shown(value: float, unit: str) -> str:
            return f"{value:.3f} ms" if unit == "ms" else f"{value:.0f} MB" if unit == "MB" else f"{value:.2f} KB"

        print(f"\nmedians of {repeat} run(s) each; {load()} at the end")
        head = f"{'figure':<60} {'agent-health':>13} {'pydantic-evals':>15} {'ours / theirs':>14}"
        print(head + (f" {'before':>12} {'now / before':>13}" if "before" in sides else ""))
        for label, ours_value, peer, unit in rows:
            line = f"{label:<60} {shown(ours_value['ours'], unit):>13} {shown(peer, unit):>15}"
            line += f" {ours_value['ours'] / peer:>13.2f}x"
            if "before" in ours_value:
                before = ours_value["before"]
                line += f" {shown(before, unit):>12} {ours_value['ours'] / before:>12.2f}x"
            print(line)

        def round_ratios(n: int, kind: str = "stored") -> list[float]:
            """Each round's own ratio at n: ours (of `kind`) over theirs, start-ups of the same round."""
            ours, theirs = cpu["ours", kind, n], cpu["theirs", "stored", n]
            ours1, theirs1 = cpu["ours", kind, 1], cpu["theirs", "stored", 1]
            return [(o - o1) / (t - t1) for o, o1, t, t1 in zip(ours, ours1, theirs, theirs1)]

        # every kind of ours measured, round by round: beside the stored ratio, --no-store's tells
        # the engine's own cost from the disk's in the same rounds
        for kind, what in kinds_run.items():
            print(f"\n{what} CPU ratio round by round (ours / theirs' stored, each round's own):")
            for n in sizes:
                r = round_ratios(n, kind)
                print(
                    f"  {n:,} cases: median {median(r):.2f}x (lowest {min(r):.2f}x, highest {max(r):.2f}x; "
                    + " ".join(f"{x:.2f}" for x in r)
                    + ")"
                )
        targets = [
            per_test("ours", "stored", n) <= per_test("theirs", "stored", n) and median(round_ratios(n)) <= 1
            for n in big
        ]
        print(
            f"\ntargets: CPU per test (stored) at most pydantic-evals' at {lo:,} and {hi:,} cases "
            "(the ratio of the medians and the rounds' median ratio): "
            f"{'met' if all(targets) else 'MISSED'}; bytes per loaded test at most {TARGET_KB} KB: "
            f"{'met' if kb['ours'] <= TARGET_KB else 'MISSED'}"
        )
        print(
            "storing alone, the store's thread CPU a result (put_many, batches of 64): "
            + ", ".join(f"{side} {median(cpu[side, 'store-thread', 0]):.3f} ms" for side in mine)
        )
        startup = {side: median(cpu[side, "stored", 1]) for side in (*mine, "theirs")}
        print(
            "start-up (1 case, counted once above): "
            + ", ".join(f"{side} {value:.2f} s" for side, value in startup.items())
            + " CPU"
        )


def count_instructions(opts: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """--instructions: every side once at two sizes under callgrind; instructions a test."""
    lo, hi = sorted(int(s) for s in (opts.sizes or "200,2000").split(","))[:2]
    if not 0 < lo < hi:
        parser.error("--instructions: two different sizes above 0")
    python, version = theirs_venv(opts.venv, opts.pydantic_evals)
    print(f"python {sys.version.split()[0]}; pydantic-evals {version}; callgrind, {lo:,} and {hi:,} cases", flush=True)
    PREFIX[:] = CALLGRIND
    with tempfile.TemporaryDirectory(prefix="peers-engine-") as tmp:
        theirs = Theirs(Path(tmp), python)
        sides = {"ours": Ours(Path(tmp) / "now", opts.tree.resolve())}
        if opts.baseline:
            sides["before"] = Ours(Path(tmp) / "before", opts.baseline.resolve())
        per: dict[tuple[str, str], float] = {}  # (side, kind) -> instructions a test
        for name, ours in sides.items():
            for kind, fn in (("stored", ours.stored), ("no-store", ours.no_store), ("secret", ours.with_secret)):
                per[name, kind] = (instructions(fn(hi)) - instructions(fn(lo))) / (hi - lo)
                print(f"  {name} {kind}: {per[name, kind] / 1e6:.3f} M a test", flush=True)
        peer = (instructions(theirs.stored(hi)) - instructions(theirs.stored(lo))) / (hi - lo)
    print(f"\ninstructions a test ({lo:,} to {hi:,} cases; user space, every thread)")
    head = f"{'figure':<30} {'agent-health':>13} {'pydantic-evals':>15} {'ours / theirs':>14}"
    print(head + (f" {'before':>12} {'now / before':>13}" if "before" in sides else ""))
    for kind, what in KINDS.items():
        line = f"{what:<30} {per['ours', kind] / 1e6:>11.3f} M {peer / 1e6:>13.3f} M {per['ours', kind] / peer:>13.2f}x"
        if "before" in sides:
            before = per["before", kind]
            line += f" {before / 1e6:>10.3f} M {per['ours', kind] / before:>12.3f}x"
        print(line)


if __name__ == "__main__":
    main()
