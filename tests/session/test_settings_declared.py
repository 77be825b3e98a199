"""Each user-settable run setting is declared once, on its RunSettings field (`Declared`): the CLI
options of `run` and `rejudge`, the environment variables, the configuration lookups, Dagster's
`EvaluateConfig` and resource fields, and docs/running.md's table all follow the declarations,
and a setting added as one declared field shows up on every surface."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap

import click
import pytest

from agent_health import ConfigError, build_settings, define_config
from agent_health.cli.rejudge import rejudge_command
from agent_health.cli.run import run_command
from agent_health.config import Config
from agent_health.model.settings import RunSettings, declared_settings, flag_name
from agent_health.session import ENV_VARS
from tests.engine.test_budget import judge_server  # noqa: F401  # the scripted judge endpoint, a fixture
from tests.support.cli import cli_in_process

from ..conftest import ROOT

DECLARED = declared_settings()


def _options(command: click.Command) -> dict[str, click.Option]:
    return {p.name: p for p in command.params if isinstance(p, click.Option) and p.name}


def _setting_names() -> set[str]:
    """Every name a run setting goes by: field paths, their last parts, flag and Dagster names."""
    names = {d.path.rpartition(".")[2] for d in DECLARED} | set(RunSettings.model_fields)
    for d in DECLARED:
        names |= {flag_name(f) for f in (d.declared.flag, d.declared.off_flag) if f}
        names |= {d.declared.dagster.rpartition(".")[2]} if d.declared.dagster else set()
    return names


@pytest.mark.parametrize(("name", "command"), [("run", run_command), ("rejudge", rejudge_command)])
def test_each_command_has_an_option_for_exactly_the_settings_declared_for_it(name, command):
    options = _options(command)
    wanted = [d for d in DECLARED if d.declared.flag and name in d.declared.commands]
    for d in wanted:
        option = options.get(flag_name(str(d.declared.flag)))
        assert option is not None, f"{name} lacks {d.declared.flag} ({d.path})"
        assert d.declared.flag in option.opts
        assert ([d.declared.short] if d.declared.short else []) == option.secondary_opts + [
            o for o in option.opts if not o.startswith("--")
        ]
        assert option.multiple == d.multiple and option.is_flag == (d.annotation is bool)
        if d.choices is not None:
            assert isinstance(option.type, click.Choice) and tuple(option.type.choices) == d.choices
    derived = {flag_name(f) for d in wanted for f in (d.declared.flag, d.declared.off_flag) if f}
    # rejudge's --cache/--no-cache is its own (default: ask the judges again); declared for run only
    own = {"cache"} if name == "rejudge" else set()
    undeclared = (set(options) & _setting_names()) - derived - own
    assert not undeclared, f"{name} has options for run settings not declared for it: {undeclared}"


def test_concurrency_has_its_short_flag():
    assert {"-c", "--concurrency"} <= set(_options(run_command)["concurrency"].opts)
    assert {"-c", "--concurrency"} <= set(_options(rejudge_command)["concurrency"].opts)


def test_environment_variables_are_exactly_the_declared_ones():
    declared = {d.declared.env: d.path for d in DECLARED if d.declared.env}
    assert {var: path for var, (path, _) in ENV_VARS.items()} == declared
    for var, path in declared.items():  # and each one is read: a bad value names the variable
        setting = next(d for d in DECLARED if d.path == path)
        if setting.annotation in (bool, int, float):
            with pytest.raises(ConfigError, match=re.escape(f"${var}")):
                build_settings(define_config(), environ={var: "not-a-value"})


def test_configuration_keys_are_fields_of_the_configuration_and_read_by_the_builder():
    for d in DECLARED:
        if not d.declared.config:
            continue
        *groups, key = d.declared.config.split(".")
        model: type = Config
        for group in groups:
            model = model.model_fields[group].annotation
        assert key in model.model_fields, f"{d.path}: configuration key {d.declared.config} is not a field"
    config = define_config(concurrency=3, timeout_s=7, epochs=2, replay="record", store={"type": "local"})
    config = config.model_copy(update={"judge": config.judge.model_copy(update={"cache": False})})
    s = build_settings(config, environ={})
    assert (s.concurrency, s.timeout_s, s.epochs, s.replay, s.judge.cache) == (3, 7, 2, "record", False)


def _dagster_names(job: str) -> tuple[set[str], set[str]]:
    """The top-level and `budget.` Dagster names of the settings declared for `job`."""
    named = [str(d.declared.dagster) for d in DECLARED if d.declared.dagster and job in d.declared.jobs]
    return {n for n in named if "." not in n}, {n.split(".")[1] for n in named if n.startswith("budget.")}


def test_dagster_run_config_and_resource_have_exactly_the_declared_dagster_settings():
    from agent_health_dagster.defs.rejudge import RejudgeConfig
    from agent_health_dagster.defs.resources import AgentHealthResource, BudgetConfig, EvaluateConfig

    top, budget = _dagster_names("evaluate")
    assert set(EvaluateConfig.model_fields) == top | {"budget"}
    assert set(BudgetConfig.model_fields) == budget
    resource_own = {"config_path", "eval_root", "state_dir", "min_pass_rate", "suite_min_pass_rate"}
    resource_own |= {"max_errored_share", "baseline", "missing_evidence"}
    assert set(AgentHealthResource.model_fields) == top | {"budget"} | resource_own
    # the rejudge job's run config: its declared settings, and (as `rejudge --cache/--no-cache`) its
    # own judge cache switch, off by default
    top, budget = _dagster_names("rejudge")
    assert {"judge_model", "labels", "grep"} <= top and budget == set(BudgetConfig.model_fields)
    assert set(RejudgeConfig.model_fields) == top | {"budget", "cache"}
    assert RejudgeConfig.model_fields["cache"].default is False
    command = {"evaluate": "run", "rejudge": "rejudge"}  # a job's settings are its command's too
    for d in DECLARED:
        if d.declared.dagster and d.declared.flag:
            assert {command[job] for job in d.declared.jobs} <= set(d.declared.commands), d.path


def test_the_rejudge_run_config_reaches_the_run_settings(tmp_path):
    """Each field of RejudgeConfig is the run setting it is declared as: given in the run config,
    it is in the settings the rejudge op builds, over the resource's."""
    from agent_health_dagster.defs.rejudge import RejudgeConfig
    from agent_health_dagster.defs.resources import AgentHealthResource, BudgetConfig

    (tmp_path / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config()\n"
    )
    resource = AgentHealthResource(
        config_path=str(tmp_path / "agent_health_config.py"), judge_model="demo:one", budget=BudgetConfig(max_tokens=9)
    )
    s = resource.run_settings(RejudgeConfig())
    assert (s.judge.model, s.judge.cache, s.labels, s.grep, s.budget.max_tokens) == ("demo:one", False, (), None, 9)
    run = RejudgeConfig(
        judge_model="demo:two", cache=True, labels=["a", "b"], grep="x", budget=BudgetConfig(max_cost_usd=1.5)
    )
    s = resource.run_settings(run)
    assert (s.judge.model, s.judge.cache, s.labels, s.grep) == ("demo:two", True, ("a", "b"), "x")
    assert (s.budget.max_cost_usd, s.budget.max_tokens) == (1.5, 9)  # the run's limits over the resource's


def test_the_docs_table_lists_every_declared_flag_and_variable_and_no_other():
    text = (ROOT / "docs" / "running.md").read_text()
    table = text.split("## Settings and environment variables", 1)[1].split("\n\n", 2)[1]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    flags = {f for row in rows for f in re.findall(r"(?<![\w-])--?[a-z][a-z-]*", row[1])}
    variables = {v for row in rows for v in re.findall(r"AGENT_HEALTH_[A-Z_]+", row[2])}
    declared_flags = {f for d in DECLARED for f in (d.declared.flag, d.declared.short, d.declared.off_flag) if f}
    assert flags == declared_flags
    assert variables == {d.declared.env for d in DECLARED if d.declared.env}
    for d in DECLARED:  # the configuration column names the key
        if d.declared.config:
            row = next(r for r in rows if str(d.declared.flag) in r[1])
            assert d.declared.config.rpartition(".")[2] in row[3], (d.path, row[3])


# One new run setting: a field with its declaration, nothing else.
NEW_FIELD = """
    retries: int = Field(
        0,
        ge=0,
        description="Times a failed test is tried again.",
        json_schema_extra=declare(
            flag="--retries",
            env="AGENT_HEALTH_RETRIES",
            config="retries",
            dagster="retries",
            commands=("run", "rejudge"),
            jobs=("evaluate", "rejudge"),
        ),
    )
"""

CHECK = """
import sys
from click.testing import CliRunner
import agent_health
assert agent_health.__file__.startswith(sys.argv[1]), agent_health.__file__
from agent_health import ConfigError, build_settings, define_config
from agent_health.cli.run import run_command
from agent_health.cli.rejudge import rejudge_command
from agent_health_dagster.defs.rejudge import RejudgeConfig
from agent_health_dagster.defs.resources import AgentHealthResource, EvaluateConfig

for command in (run_command, rejudge_command):
    shown = CliRunner().invoke(command, ["--help"]).output
    assert "--retries" in shown, shown
bad = CliRunner().invoke(run_command, ["--retries", "-1"], obj={"config": define_config()})
assert bad.exit_code == 2 and "--retries" in bad.output, bad.output
assert build_settings(define_config(), {"retries": 1}, environ={}).retries == 1
assert build_settings(define_config(), environ={"AGENT_HEALTH_RETRIES": "2"}).retries == 2
try:
    build_settings(define_config(), environ={"AGENT_HEALTH_RETRIES": "two"})
    raise AssertionError("a bad variable passed")
except ConfigError as exc:
    assert "$AGENT_HEALTH_RETRIES='two'" in str(exc), exc
assert build_settings(define_config(retries=4), environ={}).retries == 4
assert build_settings(define_config(retries=4), environ={"AGENT_HEALTH_RETRIES": "2"}).retries == 2
assert "retries" in EvaluateConfig.model_fields and "retries" in AgentHealthResource.model_fields
resource = AgentHealthResource(config_path=sys.argv[2], retries=6)
assert resource.run_settings().retries == 6
assert resource.run_settings(EvaluateConfig(retries=5)).retries == 5
assert "retries" in RejudgeConfig.model_fields
assert resource.run_settings(RejudgeConfig(retries=7)).retries == 7
print("ok")
"""


def test_a_setting_added_as_one_declared_field_is_on_every_surface(tmp_path):
    """The library copied into a fixture project with one more RunSettings field: the field alone
    puts it on the CLI of run and rejudge, in the environment, in the configuration, and in
    Dagster's run config of the evaluate and rejudge jobs and its resource."""
    copy = tmp_path / "lib"
    for package in ("agent_health", "agent_health_dagster"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    settings = copy / "agent_health" / "model" / "settings.py"
    text = settings.read_text()
    anchor = "    judge: JudgeRunSettings = Field("
    assert text.count(anchor) == 1
    settings.write_text(text.replace(anchor, NEW_FIELD.lstrip("\n") + anchor))
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent_health_config.py").write_text(
        textwrap.dedent("""
        from agent_health import define_config
        config = define_config(retries=3)
        """)
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(copy), str(project / "agent_health_config.py")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


def test_the_runs_judge_model_reaches_the_judge_and_decides_what_only_changed_reruns(judge_server, tmp_path):  # noqa: F811
    """The judge service and the up-to-date check are built from the typed run settings: the
    configuration says `judge-model`, the run says `other-model` (no patched configuration)."""
    from tests.engine.test_budget import ENV, MANY, project

    root = project(tmp_path, judge_server, evals=MANY.replace("range(200)", "range(2)"))
    first = cli_in_process("run", "evals", "--judge-model", "other-model", cwd=root, env=ENV)
    assert first.returncode == 0, first.stdout + first.stderr
    assert [post.json["model"] for post in judge_server.posts()] == ["other-model", "other-model"]

    def up_to_date(*flags: str) -> str:
        p = cli_in_process("run", "evals", "--only", "changed", "--list", *flags, cwd=root, env=ENV)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout

    assert "demo@v2: 2 skipped as up to date" in up_to_date("--judge-model", "other-model")
    assert "demo@v2: 0 skipped as up to date" in up_to_date()  # judged by another model than the config's
