"""Every number a file, the configuration, the environment or the command line can set has a
bound (agent_health/model/limits.py, listed in docs/limits.md): a value past it, NaN or an
infinity is an error before anything runs, naming the file, the test or the setting, and the
bound. A run whose planned trials (tests x epochs x agent versions) exceed the documented limit
needs --allow-large-run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_health import define_config, load_tests
from agent_health.errors import ConfigError
from agent_health.model import limits
from agent_health.model.limits import PLANNED_WORK_MAX
from agent_health.session.settings import build_settings, check_planned_work
from tests.support.cli import cli_in_process

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Diagnose why the payment service is failing."
GOOD = f'  {{"name": "fine", "prompt": "{PROMPT}"}}'


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ('"epochs": 1000000000', "epochs: Input should be less than or equal to 1000 (got 1000000000)"),
        ('"timeout": NaN', "timeout: expected a finite number (got nan)"),
        ('"timeout": Infinity', "timeout: expected a finite number (got inf)"),
        ('"timeout": -Infinity', "timeout: expected a finite number (got -inf)"),
        ('"timeout": 1e9', "timeout: Input should be less than or equal to 86400"),
        ('"maxCostUsd": Infinity', "maxCostUsd: expected a finite number (got inf)"),
        ('"max_cost_usd": 0', "max_cost_usd: Input should be greater than 0"),
    ],
)
def test_a_data_case_number_past_its_bound_is_a_load_error(tmp_path, evals, field, expected):
    """`"epochs": 1000000000` grew past 2 GB and ran for 30 minutes; `"timeout": Infinity` never timed out."""
    evals("cases.json", f'[\n{GOOD},\n  {{"name": "huge", "prompt": "{PROMPT}", {field}}}\n]\n')
    proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=report.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"cases.json: case #2 'huge': {expected}" in proc.stdout, proc.stdout
    assert "1 result(s) stored" in proc.stderr  # the file's other case ran


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("epochs=10**9", "epochs: Input should be less than or equal to 1000"),
        ('timeout=float("inf")', "timeout: expected a finite number (got inf)"),
        ('timeout=float("nan")', "timeout: expected a finite number (got nan)"),
        ('max_cost_usd=float("nan")', "max_cost_usd: expected a finite number (got nan)"),
        ("max_cost_usd=1e9", "max_cost_usd: Input should be less than or equal to 1000000"),
    ],
)
def test_a_test_option_past_its_bound_is_a_load_error(tmp_path, evals, option, expected):
    evals(
        "opts.eval.py",
        f"""
        from agent_health import test


        @test("huge", {option})
        async def huge():
            pass


        @test("fine")
        async def fine():
            pass
        """,
    )
    loaded = load_tests([tmp_path / "evals"])
    assert [t.case.name for t in loaded.tests] == ["fine"]
    [error] = [str(e) for e in loaded.errors]
    assert error.startswith("opts.eval.py:4: test 'huge': ") and expected in error, error


@pytest.mark.parametrize(
    ("config_body", "expected"),
    [
        ("epochs=10**6", "epochs: Input should be less than or equal to 1000"),
        ('timeout_s=float("inf")', "timeout_s: expected a finite number (got inf)"),
        ('timeout_s=float("nan")', "timeout_s: expected a finite number (got nan)"),
        ("concurrency=10**6", "concurrency: Input should be less than or equal to 1024"),
        ('judge={"max_retries": 1000}', "judge.max_retries: Input should be less than or equal to 100"),
        ('judge={"backoff_s": float("inf")}', "judge.backoff_s: expected a finite number (got inf)"),
        ('judge={"concurrency": 0}', "judge.concurrency: Input should be greater than or equal to 1"),
        ('judge={"settings": {"timeout_s": float("nan")}}', "judge.settings.timeout_s: expected a number from 0.001"),
        ('traces={"wait_s": float("inf")}', "traces.wait_s: expected a finite number (got inf)"),
        ('traces={"settings": {"batch_size": 10**9}}', "traces.settings.batch_size: expected a whole number from 1"),
        ('prices={"m": (float("nan"), 1.0)}', "prices['m'] (input, USD per 1M tokens): expected a number from 0"),
        (
            'store={"type": "opensearch", "settings": {"page_size": 0}}',
            "store.settings.page_size: expected a whole number from 1 to 100000, got 0",
        ),
        (
            'store={"type": "s3", "settings": {"bucket": "b", "timeout_s": float("inf")}}',
            "store.settings.timeout_s: expected a number from 0.001 to 86400, got inf",
        ),
    ],
)
def test_a_configuration_number_past_its_bound_is_an_error(tmp_path, evals, config_body, expected):
    evals("smoke.json", f"[\n{GOOD}\n]\n")
    (tmp_path / "agent_health_config.py").write_text(
        f"from agent_health import define_config\n\nconfig = define_config({config_body})\n"
    )
    proc = cli_in_process("run", "evals", "--no-judge", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / ".agent_health" / "results").exists()


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ('{"timeout_s": float("inf")}', "agents.shop.settings.timeout_s: expected a finite number"),
        ('{"retry": {"max_retries": 10**6}}', "retry.max_retries: Input should be less than or equal to 100"),
        ('{"max_response_bytes": 10**12}', "max_response_bytes: Input should be less than or equal to 1073741824"),
    ],
)
def test_an_agent_setting_past_its_bound_is_an_error_before_any_test(tmp_path, evals, settings, expected):
    evals("smoke.json", f"[\n{GOOD}\n]\n")
    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\n\nconfig = define_config(agents=[{"
        f'"key": "shop", "connector": "http", "settings": {{"endpoint": "http://127.0.0.1:9/a", **{settings}}}'
        '}], default_agent="shop@default")\n'
    )
    proc = cli_in_process("run", "evals", "--no-judge", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("AGENT_HEALTH_TIMEOUT", "inf", "$AGENT_HEALTH_TIMEOUT: expected a finite number (got inf)"),
        ("AGENT_HEALTH_TIMEOUT", "nan", "$AGENT_HEALTH_TIMEOUT: expected a finite number (got nan)"),
        ("AGENT_HEALTH_EPOCHS", "1000000", "$AGENT_HEALTH_EPOCHS: Input should be less than or equal to 1000"),
        ("AGENT_HEALTH_CONCURRENCY", "100000", "$AGENT_HEALTH_CONCURRENCY: Input should be less than or equal to 1024"),
        ("AGENT_HEALTH_DEMO_LATENCY_MS", "abc", "$AGENT_HEALTH_DEMO_LATENCY_MS: expected a number from 0 to 600000"),
        ("AGENT_HEALTH_DEMO_LATENCY_MS", "inf", "$AGENT_HEALTH_DEMO_LATENCY_MS: expected a number from 0 to 600000"),
        ("AGENT_HEALTH_DEMO_LATENCY_MS", "-5", "$AGENT_HEALTH_DEMO_LATENCY_MS: expected a number from 0 to 600000"),
        ("AGENT_HEALTH_MAX_COST", "nan", "$AGENT_HEALTH_MAX_COST: expected a finite number (got nan)"),
        ("AGENT_HEALTH_MAX_JUDGE_COST", "inf", "$AGENT_HEALTH_MAX_JUDGE_COST: expected a finite number (got inf)"),
        ("AGENT_HEALTH_MAX_TOKENS", "0", "$AGENT_HEALTH_MAX_TOKENS: Input should be greater than or equal to 1"),
    ],
)
def test_an_environment_number_past_its_bound_is_exit_2_naming_the_variable(tmp_path, evals, variable, value, expected):
    """`AGENT_HEALTH_TIMEOUT=inf` was accepted; `AGENT_HEALTH_DEMO_LATENCY_MS=abc` errored every
    test with a bare ValueError and exit 1."""
    evals("smoke.json", f"[\n{GOOD},\n{GOOD.replace('fine', 'also fine')}\n]\n")
    proc = cli_in_process("run", "evals", "--no-judge", cwd=tmp_path, env={variable: value})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert not (tmp_path / ".agent_health" / "results").exists()


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        (("--epochs", "1000000"), "1000000 is not in the range 1<=x<=1000"),
        (("--timeout", "inf"), "inf is not in the range 0<x<=86400"),
        (("--concurrency", "100000"), "100000 is not in the range 1<=x<=1024"),
        (("rejudge", "--timeout", "inf"), "inf is not in the range 0<x<=86400"),
        (("--max-cost", "inf"), "inf is not in the range 0<x<=1000000"),
        (("--max-cost", "nan"), "expected a finite number, not nan"),
        (("--max-tokens", "0"), "0 is not in the range 1<=x<=100000000000"),
        (("rejudge", "--max-judge-cost", "nan"), "expected a finite number, not nan"),
        (("compare", "a", "b", "--resamples", "10000000000"), "10000000000 is not in the range 1<=x<=1000000"),
    ],
)
def test_a_flag_past_its_bound_is_a_usage_error(tmp_path, evals, flag, expected):
    evals("smoke.json", f"[\n{GOOD}\n]\n")
    command = ("run", "evals", *flag) if flag[0].startswith("--") else flag
    proc = cli_in_process(*command, cwd=tmp_path)
    assert proc.returncode == 2 and expected in proc.stderr, proc.stderr


def many_cases(count: int, extra: str = "") -> str:
    cases = (f'  {{"name": "case {i}", "prompt": "{PROMPT}"{extra}}}' for i in range(count))
    return "[\n" + ",\n".join(cases) + "\n]\n"


def test_a_run_planning_more_trials_than_the_limit_needs_allow_large_run(tmp_path, evals):
    count = PLANNED_WORK_MAX // 1000 + 1  # at --epochs 1000, one trial past the limit
    evals("many.json", many_cases(count))
    proc = cli_in_process("run", "evals", "--no-judge", "--epochs", "1000", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        f"error: this run plans {count * 1000:,} trials ({count} test(s) x epochs x 1 agent version(s)), above the "
        f"limit of {PLANNED_WORK_MAX:,} (docs/limits.md); pass --allow-large-run (or AGENT_HEALTH_ALLOW_LARGE_RUN=1) "
        "to run it anyway"
    )
    assert not (tmp_path / ".agent_health" / "results").exists()
    # two agent versions count twice; a test's own epochs count instead of the run's
    evals("many.json", many_cases(count // 2 + 1))
    proc = cli_in_process(
        "run", "evals", "--no-judge", "--epochs", "1000", "--agent", "demo@v1", "--agent", "demo@v2", cwd=tmp_path
    )
    assert proc.returncode == 2 and "2 agent version(s)" in proc.stderr, proc.stderr
    evals("many.json", many_cases(count, ', "epochs": 1000'))
    proc = cli_in_process("run", "evals", "--no-judge", cwd=tmp_path)
    assert proc.returncode == 2 and f"plans {count * 1000:,} trials" in proc.stderr, proc.stderr


def test_allow_large_run_from_a_flag_the_environment_or_run_config_lifts_the_limit(tmp_path, evals):
    """The CLI, the environment and the Dagster run config (overrides of `build_settings`) all say it
    the same way; without it, the same plan is refused."""
    evals("many.json", many_cases(PLANNED_WORK_MAX // 1000 + 1))
    tests = load_tests([tmp_path / "evals"]).tests
    config = define_config(root=str(tmp_path))
    plan = {"demo@v2": tests}
    with pytest.raises(ConfigError, match="pass --allow-large-run"):
        check_planned_work(plan, build_settings(config, {"epochs": 1000}, environ={}))
    for overrides, environ in (
        ({"epochs": 1000, "allow_large_run": True}, {}),
        ({"epochs": 1000}, {"AGENT_HEALTH_ALLOW_LARGE_RUN": "1"}),
    ):
        settings = build_settings(config, overrides, environ=environ)
        assert check_planned_work(plan, settings) == len(tests) * 1000


def test_docs_list_every_bound():
    """docs/limits.md has one row per bound of agent_health/model/limits.py, with its value."""
    doc = (ROOT / "docs" / "limits.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| ([^|]+?) \|", doc, re.M)}
    bounds = {name: value for name, value in vars(limits).items() if name.isupper() and isinstance(value, (int, float))}
    assert set(rows) == set(bounds)
    for name, value in bounds.items():
        assert rows[name].replace(",", "") == str(int(value) if float(value).is_integer() else value), name
    for key in limits.SETTING_BOUNDS:
        assert f"`{key}`" in doc, key
