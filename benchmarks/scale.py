"""Engine cost at scale (issue 25): every figure of the issue, ours against its target or ideal, in
one table from one run.

- the HTTP connector through the engine: 1,000 tests x 200 ms at concurrency 64, as a ratio to the
  ideal ceil(1000 / 64) x 200 ms (benchmarks/connectors_http.py's `engine_ratio`, default pool);
- peak memory (max RSS) of whole CLI runs of 1,000, 10,000 and 50,000 tests (demo agent,
  concurrency 64, results stored), of `--list` alone for each (the loaded test definitions), the
  loading cost per test (the slope of `--list` between the two largest sizes) and the run minus
  the loading at the largest size (benchmarks/engine.py's suite and process helpers);
- `compare` of two versions of 10,000 and 50,000 stored results: seconds and the reading
  process's peak memory, and rollups over 10,000 and 50,000 results on the local store, S3 (a moto
  server process) and OpenSearch (the test node), from benchmarks/rollup.py run once per store and
  size (a rollup's time is its first read plus the rollup);
- a cold CLI start (one test, `--no-store`): the process's CPU with PYTHONDONTWRITEBYTECODE=1 and
  without it (the ideal: the same).

The machine is shared: the load average is printed at the start and the end. Each figure is one
run (the CLI start: the best of --repeat); the verdict column says whether it meets its target.

    .venv/bin/python benchmarks/scale.py [--quick] [--stores local,s3,opensearch] [--repeat 3]

--quick shrinks every size (100 HTTP tests; 200, 1,000 and 2,000 CLI tests; rollups of 200 and
1,000 results; the local store only unless --stores says otherwise) so a test can run it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:  # run as a script: the project and its tests/support are importable
    sys.path.insert(0, str(ROOT))

from benchmarks.engine import Projects, run_process, write_suite  # noqa: E402

STORES = ("local", "s3", "opensearch")


@dataclass
class Row:
    figure: str
    ours: str
    target: str
    met: bool | None  # None: no verdict (not measured, or no target)


@dataclass(frozen=True)
class Sizes:
    http_tests: int
    cli: tuple[int, int, int]
    results: tuple[int, int]


FULL = Sizes(http_tests=1000, cli=(1000, 10_000, 50_000), results=(10_000, 50_000))
QUICK = Sizes(http_tests=100, cli=(200, 1000, 2000), results=(200, 1000))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min), {os.cpu_count()} cores"


def n(count: int) -> str:
    return f"{count:,}"


# -- the HTTP connector through the engine -----------------------------------------------------
def http_ratio(tests: int, repeats: int) -> float | None:
    """The best run's ratio to ideal, as connectors_http.engine_ratio prints it (default pool)."""
    from benchmarks import connectors_http

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        connectors_http.engine_ratio(tests, 64, 0.2, ["aiohttp"], repeats=repeats)
    found = re.search(r"([\d.]+) x ideal best", out.getvalue())
    return float(found.group(1)) if found else None


# -- memory of whole CLI runs ------------------------------------------------------------------
def cli_peaks(sizes: tuple[int, int, int], work: Path) -> dict[tuple[str, int], float]:
    """Peak RSS (MB) of `run --list` and of a stored run at concurrency 64, for each size.

    Measured from a fresh small process: Linux keeps a process's peak RSS across exec, so a child
    started by this one (which imports the library for the HTTP figure) would report at least
    this process's size."""
    cmd = [sys.executable, __file__, "--cli-peaks", ",".join(map(str, sizes)), "--work", str(work)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, check=True)
    peaks: dict[tuple[str, int], float] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("peak "):
            _, kind, size, mb = line.split()
            peaks[kind, int(size)] = float(mb)
        else:
            print(line, flush=True)
    return peaks


def measure_peaks(sizes: list[int], work: Path) -> None:
    """The child of `cli_peaks`: it imports nothing of the library."""
    projects = Projects(work / "projects")
    peaks: dict[tuple[str, int], float] = {}
    for size in sizes:
        suite = write_suite(work / "evals", size)
        base = [sys.executable, "-m", "agent_health", "run", str(suite)]
        listed = run_process([*base, "--list"], projects.fresh(), ROOT)
        ran = run_process([*base, "--concurrency", "64"], projects.fresh(), ROOT)
        if listed.code != 0 or ran.code != 0:
            raise SystemExit(f"CLI run of {size} tests failed (--list exit {listed.code}, run exit {ran.code})")
        peaks["list", size] = listed.rss_kib / 1024
        peaks["run", size] = ran.rss_kib / 1024
        print(
            f"  {n(size)} tests: --list {peaks['list', size]:.0f} MB, run {peaks['run', size]:.0f} MB "
            f"({ran.wall:.1f} s)",
            flush=True,
        )
        print(f"peak list {size} {peaks['list', size]}\npeak run {size} {peaks['run', size]}", flush=True)


# -- rollups and compare, through benchmarks/rollup.py -----------------------------------------
ROLLUP_LINES = {
    "rollup": r"first read \+ rollup: ([\d.]+) s",
    "compare": r"comparison of two versions: ([\d.]+) s",
    "peak": r"after also loading the second version and comparing: ([\d.]+) MB",
}


def rollup_figures(store: str, results: int, where: list[str]) -> dict[str, float]:
    """rollup.py's figures for one store and size (`where`: its --endpoint or --url option)."""
    cmd = [sys.executable, str(HERE / "rollup.py"), "--store", store, "--results", str(results), *where]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    if proc.returncode != 0:
        print(f"  rollup.py --store {store} --results {results} failed: {proc.stderr[-600:]}", flush=True)
        return {}
    found = {k: float(m.group(1)) for k, rx in ROLLUP_LINES.items() if (m := re.search(rx, proc.stdout))}
    print(f"  {store}, {n(results)} results: {found}", flush=True)
    return found


@contextlib.contextmanager
def service(store: str) -> Iterator[list[str]]:
    """rollup.py's options for a server started once for every size (none for the local store)."""
    if store == "local":
        yield []
    elif store == "s3":
        from tests.support.s3 import moto_server_process

        with moto_server_process() as endpoint:
            yield ["--endpoint", endpoint]
    else:
        sys.path.insert(0, str(ROOT / "tests" / "services" / "opensearch"))
        from node import running_node

        with running_node() as url:
            yield ["--url", url]


# -- a cold CLI start --------------------------------------------------------------------------
def start_cpu(suite: Path, work: Path, dont_write: bool, repeat: int) -> float:
    """The least CPU (user + system s) of `repeat` one-test CLI runs, with or without
    PYTHONDONTWRITEBYTECODE=1."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if dont_write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = str(ROOT)
    best = math.inf
    for i in range(repeat):
        folder = work / f"start-{int(dont_write)}-{i}"
        folder.mkdir(parents=True)
        cmd = [sys.executable, "-m", "agent_health", "run", str(suite), "--no-store"]
        proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"the one-test CLI run failed (exit {os.waitstatus_to_exitcode(status)})")
        best = min(best, usage.ru_utime + usage.ru_stime)
    return best


# -- the table ---------------------------------------------------------------------------------
def verdict(met: bool | None) -> str:
    return "" if met is None else "met" if met else "MISSED"


def print_table(rows: list[Row]) -> None:
    widths = [max(len(getattr(r, f)) for r in rows) for f in ("figure", "ours", "target")]
    head = ("figure", "ours", "target / ideal")
    widths = [max(w, len(h)) for w, h in zip(widths, head)]
    line = f"{head[0]:<{widths[0]}}  {head[1]:>{widths[1]}}  {head[2]:<{widths[2]}}  verdict"
    print(line)
    print("-" * len(line))
    for r in rows:
        print(f"{r.figure:<{widths[0]}}  {r.ours:>{widths[1]}}  {r.target:<{widths[2]}}  {verdict(r.met)}".rstrip())


def measured(
    value: float | None, fmt: Callable[[float], str], check: Callable[[float], bool]
) -> tuple[str, bool | None]:
    if value is None:
        return "not measured", None
    return fmt(value), check(value)


def below(limit: float) -> Callable[[float], bool]:
    return lambda v: v < limit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--stores", help="comma-separated stores for the rollups (default: all; --quick: local)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the HTTP figure and of each CLI start")
    parser.add_argument("--cli-peaks", help=argparse.SUPPRESS)  # the child measuring CLI peaks
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.cli_peaks:
        return measure_peaks([int(size) for size in opts.cli_peaks.split(",")], opts.work)
    sizes = QUICK if opts.quick else FULL
    stores = [s.strip() for s in (opts.stores or ("local" if opts.quick else ",".join(STORES))).split(",") if s]
    unknown = set(stores) - set(STORES)
    if unknown:
        parser.error(f"unknown store(s) {', '.join(sorted(unknown))}; use {', '.join(STORES)}")
    repeat = max(1, opts.repeat)
    print(f"python {sys.version.split()[0]}; {load()} at the start", flush=True)
    started = time.perf_counter()
    rows: list[Row] = []

    print("HTTP connector through the engine ...", flush=True)
    ratio = http_ratio(sizes.http_tests, repeat)
    ours, met = measured(ratio, lambda v: f"{v:.3f} x", lambda v: v <= 1.15)
    rows.append(Row(f"HTTP engine, {n(sizes.http_tests)} x 200 ms, c64: time / ideal", ours, "<= 1.15 x", met))

    print("peak memory of whole CLI runs (demo agent, concurrency 64, stored) ...", flush=True)
    small, middle, large = sizes.cli
    with tempfile.TemporaryDirectory(prefix="agent-health-scale-") as tmp:
        peaks = cli_peaks(sizes.cli, Path(tmp))
        targets = {small: "<= 100 MB", middle: "<= 150 MB"}
        for size in sizes.cli:
            run = peaks["run", size]
            target = targets.get(size, f"<= --list + 30 MB = {peaks['list', size] + 30:.0f} MB")
            limit = float(re.findall(r"([\d.]+) MB", target)[-1])
            rows.append(Row(f"peak RSS, CLI run of {n(size)} tests", f"{run:.0f} MB", target, run <= limit))
        per_test = (peaks["list", large] - peaks["list", middle]) * 1024 / (large - middle)
        rows.append(
            Row(
                f"loading: --list peak RSS per test ({n(middle)} to {n(large)})",
                f"{per_test:.2f} KB",
                "< 1 KB",
                per_test < 1,
            )
        )
        extra = peaks["run", large] - peaks["list", large]
        rows.append(Row(f"run minus loading, {n(large)} tests", f"{extra:.0f} MB", "< 30 MB", extra < 30))

        print("rollups and compare (benchmarks/rollup.py) ...", flush=True)
        figures: dict[tuple[str, int], dict[str, float]] = {}
        for store in stores:
            try:
                with service(store) as where:
                    for results in sizes.results:
                        figures[store, results] = rollup_figures(store, results, where)
            except Exception as exc:  # a store's server cannot start: its rows say so  # noqa: BLE001
                print(f"  {store}: not measured: {type(exc).__name__}: {exc}", flush=True)
        few, many = sizes.results
        local_few, local_many = figures.get(("local", few), {}), figures.get(("local", many), {})
        for results, found in ((few, local_few), (many, local_many)):
            ours, met = measured(found.get("compare"), lambda v: f"{v:.2f} s", lambda v: v < 5)
            rows.append(Row(f"compare, 2 x {n(results)} results (local)", ours, "< 5 s", met))
        if "compare" in local_few and "compare" in local_many and local_few["compare"] > 0:
            growth = local_many["compare"] / local_few["compare"]
            rows.append(
                Row(
                    f"compare growth, {n(many)} / {n(few)} results",
                    f"{growth:.1f} x",
                    f"<= {many / few:.0f} x (linear)",
                    growth <= many / few * 1.2,  # 20% for noise: linear, not superlinear
                )
            )
        else:
            rows.append(Row(f"compare growth, {n(many)} / {n(few)} results", "not measured", "linear", None))
        ours, met = measured(local_many.get("peak"), lambda v: f"{v:.0f} MB", lambda v: v < 300)
        rows.append(Row(f"compare, 2 x {n(many)} results: peak RSS (local)", ours, "< 300 MB", met))
        for store in STORES:
            for results, limit in ((few, 1.0), (many, 5.0)):
                if store != "local":
                    limit = 3.0 if results == few else math.inf  # S3 and OpenSearch: 3 s at the smaller size
                found = figures.get((store, results), {})
                target = f"< {limit:g} s" if limit != math.inf else "(reported beside local)"
                if store not in stores:
                    rows.append(Row(f"rollup, {n(results)} results ({store})", "not measured (--stores)", target, None))
                    continue
                ours, met = measured(found.get("rollup"), lambda v: f"{v:.2f} s", below(limit))
                no_target = limit == math.inf  # reported beside the local figure: no verdict
                rows.append(Row(f"rollup, {n(results)} results ({store})", ours, target, None if no_target else met))

        print("cold CLI start (one test, --no-store) ...", flush=True)
        one = write_suite(Path(tmp) / "evals", 1)
        with_var = start_cpu(one, Path(tmp), True, repeat)
        without = start_cpu(one, Path(tmp), False, repeat)
        rows.append(
            Row("CLI start CPU, PYTHONDONTWRITEBYTECODE=1", f"{with_var:.2f} s", f"= without: {without:.2f} s", None)
        )
        rows.append(
            Row(
                "CLI start CPU, with / without the variable",
                f"{with_var / without:.2f} x",
                "<= 1.10 x (ideal 1.00)",
                with_var / without <= 1.10,
            )
        )

    print()
    print_table(rows)
    print(f"\n{load()} at the end; {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
