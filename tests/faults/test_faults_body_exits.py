"""A test, fixture, hook, agent or eval file cannot end the run: `sys.exit()`, `raise
KeyboardInterrupt`, a `BaseException` subclass and `loop.stop()` end only that test (errored,
naming the exception) or that file (a load error); the other tests run and the exit code follows
the contract (1: a test errored; 2: a file failed to load). Only a real SIGINT or SIGTERM
delivered to the process ends the run, as interrupted (130 / 143)."""

from __future__ import annotations

import os
import signal

import pytest

from tests.faults.conftest import cli
from tests.faults.lifecycle import budget, finish, jsonl_results, manifests, start, wait_until

OTHERS = """
from agent_health import expect, test

for i in range(2):
    @test(f"other {i}")
    async def other():
        expect(1).to_equal(1)
"""

CASES = {
    "sync body sys.exit(0)": ("import sys\n", "def body():\n    sys.exit(0)\n", "SystemExit: 0"),
    "async body sys.exit(3)": ("import sys\n", "async def body():\n    sys.exit(3)\n", "SystemExit: 3"),
    "raise KeyboardInterrupt": ("", "async def body():\n    raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    "sync raise KeyboardInterrupt": ("", "def body():\n    raise KeyboardInterrupt('by hand')\n", "KeyboardInterrupt"),
    "BaseException subclass": (
        "class Boom(BaseException):\n    pass\n",
        "async def body():\n    raise Boom('custom')\n",
        "Boom: custom",
    ),
    "loop.stop()": (
        "import asyncio\n",
        "async def body():\n    asyncio.get_running_loop().stop()\n    await asyncio.sleep(0.05)\n",
        "RuntimeError: a test cannot stop the run's event loop",
    ),
    "fixture sys.exit(0)": (
        "import sys\nfrom agent_health import fixture\n@fixture\ndef leaves():\n    sys.exit(0)\n",
        "def body(leaves):\n    pass\n",
        "fixture 'leaves' failed during setup: SystemExit: 0",
    ),
    "after_each sys.exit(0)": (
        "import sys\nfrom agent_health import after_each\n@after_each\ndef leaves():\n    sys.exit(0)\n",
        "def body():\n    pass\n",
        "after_each hook 'leaves' failed: exits.eval.py:5: SystemExit: 0",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_body_that_exits_is_errored_naming_the_exception_and_the_others_run(case, evals, tmp_path):
    head, body, named = CASES[case]
    evals("exits.eval.py", f"{head}from agent_health import test\n\n@test('exits')\n{body}")
    evals("others.eval.py", OTHERS)
    p = cli("run", "evals", "--reporter", "jsonl=r.jsonl", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 1, p.stdout + p.stderr  # a test errored: 1, never 0, 3 or 130
    assert "Traceback" not in p.stderr
    results = jsonl_results(tmp_path / "r.jsonl")
    assert results["exits"]["status"] == "errored"
    assert named in results["exits"]["error"]
    if "exit" in case:
        assert "never ends the run" in results["exits"]["error"]
    assert results["other 0"]["status"] == results["other 1"]["status"] == "passed"
    (run,) = manifests(tmp_path)
    assert run["status"] == "finished" and not any(run["not_run"].values())


def test_a_python_agent_that_calls_sys_exit_errors_its_test(evals, tmp_path):
    (tmp_path / "quitter.py").write_text("import sys\n\ndef answer(prompt):\n    sys.exit(0)\n")
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\n"
        "config = define_config(agents=[{'key': 'py', 'connector': 'python',"
        " 'settings': {'function': 'quitter:answer'}, 'versions': {'v1': {}}}], default_agent='py@v1')\n"
    )
    evals(
        "a.eval.py",
        "from agent_health import test\n\n@test('asks', prompt='hi')\nasync def asks(agent):\n    await agent.run()",
    )
    evals("others.eval.py", OTHERS)
    p = cli("run", "evals", "--reporter", "jsonl=r.jsonl", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 1, p.stdout + p.stderr
    results = jsonl_results(tmp_path / "r.jsonl")
    assert results["asks"]["status"] == "errored" and "SystemExit: 0" in results["asks"]["error"]
    assert results["other 0"]["status"] == "passed"


def test_sys_exit_at_import_is_a_load_error_and_the_other_files_run(evals, tmp_path):
    evals("quits.eval.py", "import sys\nsys.exit(0)\n")
    evals("others.eval.py", OTHERS)
    p = cli("run", "evals", "--reporter", "jsonl=r.jsonl", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 2, p.stdout + p.stderr  # a file failed to load
    assert "quits.eval.py:2" in p.stdout + p.stderr and "SystemExit: 0" in p.stdout + p.stderr
    assert set(jsonl_results(tmp_path / "r.jsonl")) == {"other 0", "other 1"}


def test_sys_exit_at_import_of_the_only_file_is_a_load_error(evals, tmp_path):
    evals("quits.eval.py", "import sys\nsys.exit(0)\n")
    p = cli("run", "evals", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 2 and "quits.eval.py:2" in p.stderr and "SystemExit" in p.stderr


SLOW = """
import asyncio
from pathlib import Path
from agent_health import test

for i in range(4):
    @test(f"slow {i}")
    async def slow(test_info):
        Path(test_info.name + ".started").touch()
        await asyncio.sleep(30)
"""


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_only_a_real_signal_ends_the_run_as_interrupted(sig, code, evals, tmp_path):
    evals("slow.eval.py", SLOW)
    proc = start("run", "evals", "--reporter", "jsonl=r.jsonl", cwd=tmp_path)
    wait_until(lambda: len(list(tmp_path.glob("*.started"))) == 4, budget(20))  # every test in flight
    os.kill(proc.pid, sig)
    rc, _, err = finish(proc, budget(10))
    assert rc == code, err
    assert "Traceback" not in err and f"interrupted ({sig.name})" in err
    (run,) = manifests(tmp_path)
    assert run["status"] == "interrupted"
    results = jsonl_results(tmp_path / "r.jsonl")  # the tests cut short, errored with the reason
    assert results and all(r["status"] == "errored" and sig.name in r["error"] for r in results.values())


def test_a_real_ctrl_c_while_an_eval_file_is_imported_interrupts_instead_of_a_load_error(evals, tmp_path):
    evals("slow_import.eval.py", "import time\nfrom pathlib import Path\nPath('importing').touch()\ntime.sleep(30)\n")
    proc = start("run", "evals", cwd=tmp_path)
    wait_until((tmp_path / "importing").exists, budget(20))
    os.kill(proc.pid, signal.SIGINT)
    rc, out, err = finish(proc, budget(5))
    assert rc == 130, out + err
    assert "interrupted" in err and "load error" not in out + err and "Traceback" not in err


def test_loop_stop_through_run_tests_errors_only_that_test(evals, tmp_path):
    from agent_health import RunSettings, load_config, load_tests, run_tests

    head, body, named = CASES["loop.stop()"]
    evals("exits.eval.py", f"{head}from agent_health import test\n\n@test('exits')\n{body}")
    evals("others.eval.py", OTHERS)
    results = run_tests(load_tests([tmp_path / "evals"]).tests, load_config(), "demo@v2", RunSettings(store=None))
    by_name = {r.name: r for r in results}
    assert by_name["exits"].status == "errored" and named in (by_name["exits"].error or "")
    assert by_name["other 0"].status == by_name["other 1"].status == "passed"


# A test that stops the loop after its agent ran (so it has a run to re-judge), beside tests that
# are in flight when it does.
STOPPER = """
import asyncio
from agent_health import expect, test

@test("stops the loop", prompt="Why is checkout slow?")
async def stops(agent):
    await agent.run()
    asyncio.get_running_loop().stop()
    await asyncio.sleep(0.05)

for i in range(3):
    @test(f"innocent {i}", prompt="Why is checkout slow?")
    async def innocent(agent):
        result = await agent.run()
        await asyncio.sleep(0.3)
        expect(result.output).to_be_truthy()
"""
STOPPED = "RuntimeError: a test cannot stop the run's event loop"


def test_loop_stop_under_rejudge_errors_only_that_test(evals, tmp_path):
    """`rejudge` runs the engine's loop as `run` does: loop.stop() was a traceback there, and the
    tests in flight errored with it."""
    evals("stopper.eval.py", STOPPER)
    first = cli("run", "evals", cwd=tmp_path, timeout=budget(30))
    assert first.returncode == 1, first.stdout + first.stderr
    p = cli("rejudge", "--reporter", "jsonl=r.jsonl", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 1, p.stdout + p.stderr  # a test errored: 1, not a crash
    assert "Traceback" not in p.stdout + p.stderr
    results = jsonl_results(tmp_path / "r.jsonl")
    assert results["stops the loop"]["status"] == "errored" and STOPPED in results["stops the loop"]["error"]
    assert [results[f"innocent {i}"]["status"] for i in range(3)] == ["passed"] * 3


def test_loop_stop_in_the_dagster_evaluation_and_rejudge_steps_errors_only_that_test(evals, tmp_path):
    """The Dagster steps run the engine through `agent_health.pipeline` (`run_partitions`,
    `rejudge_partitions`): each step succeeds, the stopping test's partition is errored naming why.
    The evaluation step failed with a stack trace."""
    from tests.faults.dagster_project import dagster_instance, evaluate, pipeline_for, register

    evals("stopper.eval.py", STOPPER)
    pipeline = pipeline_for(tmp_path)
    with dagster_instance(tmp_path) as instance:
        assert register(instance, pipeline) == []
        for job in ("", "rejudge__stopper"):
            found = evaluate(instance, pipeline, "stopper", ["demo@v2"], job)  # the step succeeded
            stopped = found["demo@v2|stops-the-loop"]
            assert stopped["status"] == "errored" and STOPPED in stopped["error"], job
            assert [found[f"demo@v2|innocent-{i}"]["status"] for i in range(3)] == ["passed"] * 3, job
