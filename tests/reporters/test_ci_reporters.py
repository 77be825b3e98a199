"""Reporting where CI users look, through the real CLI on the shipped demo evals: the GitHub job
summary and annotations, TAP version 14, `--shard i/n` and `agent-health merge`, the token and
cost split of the summary, and `-f FILE`."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_health import RunReport
from agent_health.connectors.demo import LATENCY_ENV
from agent_health.model import RunSummary, TestResult, Usage
from agent_health.reporters.github import escape_data, escape_property
from agent_health.reporters.summary import cost_text, tokens_text
from tests.support.cli import cli_in_process

from ..conftest import ROOT

# A test that fails with a message GitHub's command syntax must not read as syntax: `%`, `,`, `:`,
# a newline and what would be a second workflow command on the next line.
ODD_EVAL = """
from agent_health import expect, test


@test("odd, name: 100%", prompt="say something")
async def odd(agent, judge):
    result = await agent.run()
    expect(result.output).to_equal("an answer")


@test("breaks", prompt="say something")
async def breaks(agent, judge):
    raise RuntimeError("50% done, then\\n::warning::injected")
"""
AGENTS = ("--agent", "demo@v1", "--agent", "demo@v2")


@pytest.fixture(scope="module")
def ci(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ci")
    shutil.copytree(ROOT / "evals", root / "evals")
    (root / "evals" / "odd.eval.py").write_text(ODD_EVAL)
    (root / "agent_health_config.py").write_text("from agent_health import define_config\nconfig = define_config()\n")
    return root


@pytest.fixture(scope="module")
def full(ci) -> RunReport:
    """The unsharded run of both demo versions: what every other figure is checked against."""
    p = cli_in_process("run", "evals", *AGENTS, "--no-store", "--reporter", "json=full.json", cwd=ci)
    assert p.returncode == 1, p.stderr
    return RunReport.model_validate_json((ci / "full.json").read_bytes())


def unescape(text: str) -> str:
    return text.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def parse_annotations(stdout: str) -> list[dict[str, str]]:
    """`::error k=v,k=v::message` lines as GitHub reads them (properties split on raw `,` and `=`)."""
    out = []
    for line in stdout.splitlines():
        m = re.fullmatch(r"::error (?P<props>[^:]*)::(?P<message>.*)", line)
        if m:
            props = dict(p.split("=", 1) for p in m.group("props").split(","))
            out.append({k: unescape(v) for k, v in props.items()} | {"message": unescape(m.group("message"))})
    return out


def test_github_reporter_annotates_each_failure_at_its_file_and_line_and_writes_the_job_summary(ci, full):
    summary = ci / "step-summary.md"
    summary.write_text("output of an earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(ci)}
    p = cli_in_process("run", "evals", *AGENTS, "--no-store", "--reporter", "github", cwd=ci, env=env)
    assert p.returncode == 1, p.stderr
    notes = parse_annotations(p.stdout)
    failing = [r for r in full.results if r.status != "passed"]
    assert len(failing) >= 3 and len(notes) == len(failing)
    by_title = {n["title"]: n for n in notes}
    for r in failing:
        note = by_title[f"{r.status}: {r.name} ({r.agent})"]
        assert note["file"] == f"evals/{r.source_file}"  # from the repository root, where GitHub looks
        if r.source_file.endswith(".eval.py"):  # the line of the test's @test(...)
            assert note["line"] == str(r.line)
            source = (ci / note["file"]).read_text().splitlines()
            assert any(r.name.split(" > ")[-1] in ln for ln in source[r.line - 1 : r.line + 2]), (r.name, r.line)
    odd = by_title["failed: odd, name: 100% (demo@v1)"]
    assert odd["line"] == "5" and "to_equal('an answer')" in odd["message"]
    broken = by_title["errored: breaks (demo@v2)"]
    assert broken["line"] == "11" and "50% done, then\n::warning::injected" in broken["message"]
    # the message stays one command: nothing in stdout starts a second one
    assert not any(line.startswith("::warning") for line in p.stdout.splitlines())
    text = summary.read_text()
    assert text.startswith("output of an earlier step\n## agent-health results")  # appended
    for s in full.summaries:
        row = next(line for line in text.splitlines() if line.startswith(f"| {s.agent} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1:6] == [str(s.total), str(s.passed), str(s.failed), str(s.errored), "0"]
        assert cells[6] == f"{s.pass_rate:.0%}"
    for r in failing:
        assert f"`{r.test_id}` ({r.agent})" in text


def test_github_reporter_refuses_a_file_and_writes_no_summary_outside_actions(ci):
    p = cli_in_process("run", "evals/smoke.yaml", "--no-store", "--reporter", "github=out.md", cwd=ci)
    assert p.returncode == 2 and "github reporter takes no FILE" in p.stderr and "Traceback" not in p.stderr
    p = cli_in_process(
        "run", "evals/odd.eval.py", "--no-store", "--reporter", "github", cwd=ci, env={"GITHUB_STEP_SUMMARY": ""}
    )
    assert p.returncode == 1 and len(parse_annotations(p.stdout)) == 2 and "Traceback" not in p.stderr
    # a summary file that cannot be written: said, exit 2, the annotations still printed
    unwritable = {"GITHUB_STEP_SUMMARY": str(ci / "evals")}
    p = cli_in_process("run", "evals/odd.eval.py", "--no-store", "--reporter", "github", cwd=ci, env=unwritable)
    assert p.returncode == 2 and f"cannot write the job summary {ci / 'evals'}" in p.stderr
    assert len(parse_annotations(p.stdout)) == 2 and "Traceback" not in p.stderr


def test_escaping_follows_the_github_toolkit():
    assert escape_data("100%\r\nnext::") == "100%25%0D%0Anext::"
    assert escape_property("a,b: 5%\n") == "a%2Cb%3A 5%25%0A"


def _key(r: TestResult) -> tuple[str, str]:
    return (r.agent, r.test_id)


# what differs between two runs of the same test: ids, clocks and the latency measured
VOLATILE = {"eval_run_id", "agent_eval_run_id", "run_id", "trace_id", "started_at", "duration_ms", "judged_at",
            "latency_ms", "turn_latency_ms"}  # fmt: skip


def _strip(doc: Any) -> Any:
    if isinstance(doc, dict):
        if doc.get("name") == "metric:latency_ms":  # the latency metric signal's measured value
            doc = {k: v for k, v in doc.items() if k != "value"}
        if str(doc.get("name", "")).startswith("to_complete_within("):  # the run's measured seconds
            doc = {**doc, "evidence": {**(doc.get("evidence") or {}), "actual": None}}
        return {k: _strip(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


def _comparable(r: TestResult) -> str:
    return json.dumps(_strip(r.model_dump(mode="json")), sort_keys=True)


def test_shards_partition_the_tests_and_merge_gives_the_unsharded_figures(ci, full):
    shards = []
    # The shards' agent is slower than the unsharded run's, as a loaded machine makes it: what a run
    # measures (its seconds, latencies) may differ between shards and the run; nothing else may.
    slower = {LATENCY_ENV: "2"}
    for i in range(1, 5):
        p = cli_in_process(
            "run", "evals", *AGENTS, "--no-store", "--shard", f"{i}/4", "--reporter", f"json=s{i}.json", cwd=ci,
            env=slower,
        )  # fmt: skip
        assert p.returncode in (0, 1), p.stderr
        shards.append(RunReport.model_validate_json((ci / f"s{i}.json").read_bytes()))
        assert str(shards[-1].shard) == f"{i}/4"
    keys = [{_key(r) for r in s.results} for s in shards]
    assert all(keys) and sum(map(len, keys)) == len(set().union(*keys))  # disjoint, none empty
    assert set().union(*keys) == {_key(r) for r in full.results}  # covering every test
    # deterministic: the same shard lists the same tests again
    listed = cli_in_process("run", "evals", "--shard", "2/4", "--list", cwd=ci).stdout.splitlines()
    assert {line.split()[0] for line in listed[:-1]} == {tid for _, tid in keys[1]}

    p = cli_in_process("merge", *(f"s{i}.json" for i in (3, 1, 4, 2)), "-o", "merged.json", cwd=ci)
    assert p.returncode == 1, p.stderr  # as the unsharded run: tests failed
    merged = RunReport.model_validate_json((ci / "merged.json").read_bytes())
    figures = {"duration_ms"}
    assert [s.model_dump(exclude=figures) for s in merged.summaries] == [
        s.model_dump(exclude=figures) for s in full.summaries
    ]
    assert merged.summaries[1].cost_usd > 0 and merged.summaries[1].input_tokens > 0
    assert sorted(map(_comparable, merged.results)) == sorted(map(_comparable, full.results))
    assert merged.merged_from == [s.eval_run_id for s in shards] and merged.shard is None

    missing = cli_in_process("merge", "s1.json", "s2.json", "s4.json", cwd=ci)
    assert missing.returncode == 2 and "shard(s) 3/4 missing" in missing.stderr
    twice = cli_in_process("merge", "s1.json", "s1.json", "s2.json", "s3.json", cwd=ci)
    assert twice.returncode == 2 and "are both shard 1/4" in twice.stderr
    (ci / "bad.json").write_text("{not json")
    bad = cli_in_process("merge", "bad.json", cwd=ci)
    assert bad.returncode == 2 and "bad.json: not an agent-health JSON report" in bad.stderr
    wrong = cli_in_process("run", "evals", "--shard", "5/4", cwd=ci)
    assert wrong.returncode == 2 and "INDEX must be at most COUNT" in wrong.stderr


def check_tap14(text: str) -> list[dict[str, Any]]:
    """A small TAP version 14 check: the version line, test points numbered from 1 in order, YAML
    blocks that parse, one plan that matches the count. Returns the points."""
    lines = text.splitlines()
    assert lines[0] == "TAP version 14"
    points: list[dict[str, Any]] = []
    plans = []
    i = 1
    while i < len(lines):
        line = lines[i]
        m = re.fullmatch(r"(ok|not ok) (\d+) - (.*?)(?: # (SKIP|TODO)\b.*)?", line)
        if m:
            assert int(m.group(2)) == len(points) + 1, line
            points.append({"ok": m.group(1) == "ok", "description": m.group(3), "directive": m.group(4)})
        elif line == "  ---":
            end = lines.index("  ...", i)
            points[-1]["yaml"] = yaml.safe_load("\n".join(x[2:] for x in lines[i + 1 : end]))
            i = end
        elif re.fullmatch(r"1\.\.\d+", line):
            plans.append(int(line[3:]))
        else:
            assert line.startswith("#") or not line.strip(), f"not TAP: {line!r}"
        i += 1
    assert plans == [len(points)]
    return points


def test_tap_reporter_writes_tap_14(ci, full):
    p = cli_in_process("run", "evals", *AGENTS, "--no-store", "--reporter", "tap", cwd=ci)
    assert p.returncode == 1, p.stderr
    points = check_tap14(p.stdout)
    assert len(points) == len(full.results)
    failing = {(r.agent, r.test_id): r for r in full.results if r.status != "passed"}
    bad = [pt for pt in points if not pt["ok"]]
    assert len(bad) == len(failing)
    for pt in bad:
        tid, agent = re.fullmatch(r"(.*) \[(.*)\]", pt["description"]).groups()  # type: ignore[union-attr]
        r = failing[(agent, tid.replace("\\#", "#"))]
        assert pt["yaml"]["status"] == r.status and pt["yaml"]["file"] == r.source_file
        assert pt["yaml"].get("line") == r.line and pt["yaml"]["message"] == r.error
    assert "# Est. cost: $" in p.stdout and " (judge) = $" in p.stdout


def test_summary_splits_prompt_and_completion_tokens_and_agent_and_judge_cost(ci, full):
    def res(tid: str, cost: float, judge: float | None) -> TestResult:
        return TestResult(
            test_id=tid, name=tid, suite="s", source_file="s.eval.py", agent="a@v1", status="passed",
            usage=Usage.of(1_200_000, 300_000), judge_usage=Usage.of(2_000, 500), cost_usd=cost, judge_cost_usd=judge,
        )  # fmt: skip

    s = RunSummary.of("a@v1", [res("x", 5.0, 1.25), res("y", 1.0, None)])
    assert (s.judge_input_tokens, s.judge_output_tokens, s.judge_cost_usd, s.cost_usd) == (4_000, 1_000, 1.25, 6.0)
    assert tokens_text([s]) == "2.4M prompt / 601K completion"
    assert cost_text([s]) == "$4.75 (agent) + $1.25 (judge) = $6.00"
    # the same from the stores' compact summaries (compare, report, the Dagster rollups read those)
    from agent_health.stores import ResultSummary

    compact = RunSummary.of("a@v1", [ResultSummary.of(res("x", 5.0, 1.25)), ResultSummary.of(res("y", 1.0, None))])
    assert compact.model_dump(exclude={"duration_ms"}) == s.model_dump(exclude={"duration_ms"})
    # through the CLI: the totals line of the real run
    p = cli_in_process("run", "evals", *AGENTS, "--no-store", cwd=ci)
    assert f"Tokens: {tokens_text(full.summaries)} (agent + judge)" in p.stdout
    assert f"Est. cost: {cost_text(full.summaries)}" in p.stdout


def test_f_names_eval_files_and_folders_like_path_arguments(ci):
    by_f = cli_in_process("run", "-f", "evals/smoke.yaml", "-f", "evals/runbooks.eval.py", "--list", cwd=ci)
    by_path = cli_in_process("run", "evals/smoke.yaml", "evals/runbooks.eval.py", "--list", cwd=ci)
    assert by_f.returncode == 0 and by_f.stdout == by_path.stdout
    ids = {line.split()[0] for line in by_f.stdout.splitlines()[:-1]}
    assert {i.split("::")[0] for i in ids} == {"smoke", "runbooks"}
    mixed = cli_in_process("run", "evals/odd.eval.py", "-f", "evals/smoke.yaml", "--list", cwd=ci)
    assert mixed.stdout.endswith("4 test(s) in 2 file(s)\n") and "smoke::oom-triage" in mixed.stdout
    folder = cli_in_process("run", "-f", "evals", "--list", cwd=ci)
    assert folder.stdout == cli_in_process("run", "evals", "--list", cwd=ci).stdout and "rca::" in folder.stdout


def _docs_block(head: str, lang: str = r"\w*") -> str:
    text = (ROOT / "docs" / "reports.md").read_text()
    m = re.search(rf"^```{lang}\n({re.escape(head)}.*?)^```", text, re.M | re.S)
    assert m, head
    return m.group(1)


def test_the_documented_annotation_is_what_the_run_prints(ci):
    line = _docs_block("::error file=evals/rca.eval.py").strip()
    p = cli_in_process("run", "evals", "--agent", "demo@v2", "--no-store", "--reporter", "github", cwd=ci,
                env={"GITHUB_WORKSPACE": str(ci), "GITHUB_STEP_SUMMARY": ""})  # fmt: skip
    assert line in p.stdout.splitlines()


def test_the_documented_workflow_runs_as_written(tmp_path):
    """Each job's `agent-health` steps run as the runner would: per matrix entry, with
    GITHUB_STEP_SUMMARY and GITHUB_WORKSPACE set, and the shell's glob expanded."""
    shutil.copytree(ROOT / "evals", tmp_path / "evals")
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config()\n"
    )
    workflow = yaml.safe_load(_docs_block("# .github/workflows/evals.yml", "yaml"))
    summary = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(tmp_path)}
    outputs = []
    for job in ("evals", "report"):
        spec = workflow["jobs"][job]
        matrix = spec.get("strategy", {}).get("matrix", {"shard": [None]})
        for shard in matrix["shard"]:
            for step in spec["steps"]:
                run = step.get("run", "")
                if not run.startswith("agent-health "):
                    continue
                words = []
                for word in shlex.split(run.replace("${{ matrix.shard }}", str(shard)))[1:]:
                    words += sorted(str(p.name) for p in tmp_path.glob(word)) if "*" in word else [word]
                p = cli_in_process(*words, cwd=tmp_path, env=env)
                assert p.returncode in (0, 1) and "Traceback" not in p.stderr, (run, p.stderr)
                outputs.append(p)
    assert len(outputs) == 5  # four shards, one merge
    full = cli_in_process("run", "evals", "--no-store", "--reporter", "json=full.json", cwd=tmp_path)
    report = RunReport.model_validate_json((tmp_path / "full.json").read_bytes())
    merged = RunReport.model_validate_json((tmp_path / "merged.json").read_bytes())
    assert [s.model_dump(exclude={"duration_ms"}) for s in merged.summaries] == [
        s.model_dump(exclude={"duration_ms"}) for s in report.summaries
    ]
    assert outputs[-1].returncode == full.returncode
    failing = [r for r in report.results if r.status != "passed"]
    assert len(parse_annotations(outputs[-1].stdout)) == len(failing) > 0
    assert summary.read_text().count("## agent-health results") == 1  # the merge job's, once


JUDGED = """
from agent_health import test

def make(i):
    @test(f"case {i}", prompt="Diagnose why the payment service is failing.")
    async def body(agent, judge):
        await judge(await agent.run(), "identifies that the payment service cannot reach its database")

for i in range(3):
    make(i)
"""


def test_every_summary_shows_the_judge_cost_apart_from_the_agent_cost(tmp_path):
    """A priced judge on a real OpenAI-compatible server: its tokens and cost are counted apart in
    the JSON summaries and said apart by the terminal summary, the job summary and the TAP totals."""
    from tests.engine.test_budget import CONFIG, JUDGE_CALL_USD, JUDGE_PRICE, JUDGE_USAGE
    from tests.judges.helpers import ScriptedServer, chat, verdict_json

    server = ScriptedServer()
    server.default = lambda rec: chat(verdict_json(), usage=JUDGE_USAGE, model=rec.json["model"])
    try:
        config = CONFIG.format(price=JUDGE_PRICE, model="judge-model", cache=False, url=server.url)
        (tmp_path / "agent_health_config.py").write_text(config)
        (tmp_path / "evals").mkdir()
        (tmp_path / "evals" / "judged.eval.py").write_text(JUDGED)
        env = {"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "AGENT_HEALTH_DEMO_LATENCY_MS": "0"}
        args = ("run", "evals", "--no-store", "--reporter", "json=r.json", "--reporter", "tap=r.tap")
        p = cli_in_process(*args, "--reporter", "github", cwd=tmp_path, env=env)
    finally:
        server.close()
    assert p.returncode == 0, p.stderr
    (s,) = RunReport.model_validate_json((tmp_path / "r.json").read_bytes()).summaries
    assert s.judge_cost_usd == pytest.approx(3 * JUDGE_CALL_USD) and s.cost_usd > s.judge_cost_usd
    assert (s.judge_input_tokens, s.judge_output_tokens) == (3 * JUDGE_USAGE[0], 3 * JUDGE_USAGE[1])
    agent = s.cost_usd - s.judge_cost_usd
    said = f"${agent:.4f} (agent) + ${s.judge_cost_usd:.4f} (judge) = ${s.cost_usd:.4f}"
    assert f"Est. cost: {said}" in p.stderr  # the terminal summary (stdout is GitHub's)
    assert f"**Est. cost:** {said}" in (tmp_path / "summary.md").read_text()
    assert f"# Est. cost: {said}" in (tmp_path / "r.tap").read_text()
    assert f"Tokens: {tokens_text([s])} (agent + judge)" in p.stderr


def test_merge_reads_json_lines_shards_too(ci):
    one = ("run", "evals/rca.eval.py", "--agent", "demo@v2", "--no-store")
    assert cli_in_process(*one, "--reporter", "json=rca.json", cwd=ci).returncode == 1
    cli_in_process(*one, "--shard", "1/2", "--reporter", "jsonl=rca-1.jsonl", cwd=ci)
    cli_in_process(*one, "--shard", "2/2", "--reporter", "json=rca-2.json", cwd=ci)
    p = cli_in_process("merge", "rca-1.jsonl", "rca-2.json", cwd=ci)  # the merged report on stdout
    merged, full = (
        RunReport.model_validate_json(p.stdout),
        RunReport.model_validate_json((ci / "rca.json").read_bytes()),
    )
    assert [s.model_dump(exclude={"duration_ms"}) for s in merged.summaries] == [
        s.model_dump(exclude={"duration_ms"}) for s in full.summaries
    ]
    assert "Est. cost:" in p.stderr  # the summary keeps off stdout


def test_a_library_run_takes_its_shard_from_the_settings():
    """`run_tests` with RunSettings(shard=...) runs the same split as the CLI."""
    from agent_health import define_config, load_tests, run_tests
    from agent_health.model import RunSettings

    loaded = load_tests([ROOT / "evals" / "rca.eval.py"]).tests
    ids = [t.case.id for t in sorted(loaded, key=lambda t: t.case.id)]
    runs = []
    for index in (1, 2, 3):
        settings = RunSettings(shard=f"{index}/3", store=None)  # type: ignore[arg-type]
        runs.append(sorted(r.test_id for r in run_tests(loaded, define_config(), "demo@v1", settings)))
    assert runs == [ids[i::3] for i in range(3)] and all(runs)
