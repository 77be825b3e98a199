"""Benchmark: the HTML report and the comparison at scale (target: a 1,000-test report opens and
filters in well under a second in a browser, and its size grows linearly).

    python benchmarks/reports.py [--tests 1000] [--runs 3]

Results are real demo-agent results (trajectories, signals, verdicts, metrics, insights) from the
shipped evals, copied under N test ids with mixed statuses, labels and suites. Prints the page's
size per test at several N, its render time, and, in headless Chromium (Debian's package, driven
by Playwright), the time to open the page, filter it, sort it and open a test (best of --runs);
then `compare_results` over N paired tests with 10,000 bootstrap resamples and the comparison page.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_health import RunReport, TestResult
from agent_health.analysis.compare import compare_results
from agent_health.reporters.html import ReportBuilder, write_comparison
from tests.support.browser import launch_chromium

ROOT = Path(__file__).resolve().parents[1]


def templates(root: Path) -> list[TestResult]:
    """Real results of demo@v1 and demo@v2 over the shipped evals, from the CLI."""
    shutil.copytree(ROOT / "evals", root / "evals")
    (root / "agent_health_config.py").write_text("from agent_health import define_config\nconfig = define_config()\n")
    out = root / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "agent_health", "run", "evals", "--agent", "demo@v1", "--agent", "demo@v2",
         "--reporter", f"json={out}"],
        cwd=root, env=env, capture_output=True, check=False,
    )  # fmt: skip
    return RunReport.model_validate_json(out.read_bytes()).results


def synthetic(base: list[TestResult], n: int, agent: str, seed: int = 7) -> list[TestResult]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = base[i % len(base)]
        status = "errored" if i % 97 == 0 else rng.choice(["passed", "passed", "failed"])
        out.append(
            t.model_copy(
                update={
                    "test_id": f"bench/s{i % 9}::t{i:05d}",
                    "name": f"{t.name} #{i}",
                    "suite": f"bench/s{i % 9}",
                    "agent": agent,
                    "status": status,
                    "score": round(rng.random(), 3),
                    "cost_usd": round(rng.uniform(0.0001, 0.02), 6),
                    "duration_ms": rng.uniform(5, 5000),
                    "labels": (f"group:{i % 13}", "category:RCA", f"difficulty:{['Easy', 'Medium', 'Hard'][i % 3]}"),
                }
            )
        )
    return out


def render(results: list[TestResult], path: Path) -> float:
    t0 = time.perf_counter()
    ReportBuilder().extend(results).write(path)
    return time.perf_counter() - t0


FRAME = "() => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))"


def timed(page, action: str) -> float:
    """Milliseconds from `action` until the next frame is ready (style, layout and paint included)."""
    return page.evaluate(
        f"""async () => {{
            const t0 = performance.now();
            {action};
            document.body.offsetHeight;
            await ({FRAME})();
            return performance.now() - t0;
        }}"""
    )


def browser_figures(path: Path, runs: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    best: dict[str, float] = {}
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        for _ in range(runs):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            t0 = time.perf_counter()
            page.goto(path.as_uri(), wait_until="load")
            page.evaluate(FRAME)
            wall = (time.perf_counter() - t0) * 1000
            nav = page.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0])")
            nav = json.loads(nav)
            figures = {
                "open: navigation to load event (ms)": nav["loadEventEnd"] - nav["startTime"],
                "open: goto() until first frame, wall clock (ms)": wall,
                "filter status=failed (ms)": timed(
                    page, "const s = document.getElementById('f-status'); s.value = 'failed'; "
                    "s.dispatchEvent(new Event('change'))"
                ),
                "filter label (ms)": timed(
                    page, "const s = document.getElementById('f-label'); s.value = 'difficulty:Hard'; "
                    "s.dispatchEvent(new Event('change'))"
                ),
                "search 't00' (ms)": timed(
                    page, "const s = document.getElementById('f-search'); s.value = 't00'; "
                    "s.dispatchEvent(new Event('input'))"
                ),
                "clear filters (ms)": timed(
                    page, "for (const id of ['f-status', 'f-label', 'f-search']) { "
                    "const s = document.getElementById(id); s.value = ''; "
                    "s.dispatchEvent(new Event(id === 'f-search' ? 'input' : 'change')); }"
                ),
                "sort by score (ms)": timed(
                    page, "const s = document.getElementById('sort'); s.value = 'score:asc'; "
                    "s.dispatchEvent(new Event('change'))"
                ),
                "sort by cost (ms)": timed(
                    page, "const s = document.getElementById('sort'); s.value = 'cost:desc'; "
                    "s.dispatchEvent(new Event('change'))"
                ),
                "open a test's details (ms)": timed(page, "document.querySelector('.test > .row').click()"),
            }  # fmt: skip
            if errors:
                raise SystemExit(f"page errors: {errors}")
            for k, v in figures.items():
                best[k] = min(v, best.get(k, float("inf")))
            page.close()
        browser.close()
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ah-reports-"))
    try:
        base = templates(work / "project")
        print(f"templates: {len(base)} real demo results")
        print("\npage size and render time")
        sizes = {}
        for n in sorted({100, 250, 500, args.tests, 2 * args.tests}):
            path = work / f"report-{n}.html"
            seconds = render(synthetic(base, n, "bench@v2"), path)
            sizes[n] = path.stat().st_size
            print(
                f"  {n:>5} tests: {sizes[n] / 1e6:7.2f} MB, {sizes[n] / n / 1e3:6.2f} kB/test, render {seconds:.2f} s"
            )
        lo, hi = min(sizes), max(sizes)
        print(f"  growth {lo} -> {hi} tests: {(sizes[hi] - sizes[lo]) / (hi - lo) / 1e3:.2f} kB per added test")

        page = work / f"report-{args.tests}.html"
        print(f"\nbrowser, {args.tests} tests (best of {args.runs})")
        for k, v in browser_figures(page, args.runs).items():
            print(f"  {k:<50} {v:8.1f}")

        base_side = synthetic(base, args.tests, "bench@v1", seed=1)
        cand_side = synthetic(base, args.tests, "bench@v2", seed=2)
        t0 = time.perf_counter()
        cmp = compare_results(base_side, cand_side)
        took = time.perf_counter() - t0
        print(f"\ncompare_results over {args.tests} paired tests (10,000 bootstrap resamples): {took:.2f} s")
        t0 = time.perf_counter()
        cpage = write_comparison(work / "compare.html", cmp, base_side, cand_side)
        print(
            f"comparison page: {time.perf_counter() - t0:.2f} s, {cpage.stat().st_size / 1e6:.2f} MB "
            f"({sum(t.flip != 'same' for t in cmp.tests)} tests with their two runs)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
