"""Every configuration example in README.md and docs/ is loaded: Python configurations build (every
agent version's connector validates its settings, the store opens), YAML blocks parse, the
PostgreSQL instance block is the tested template, and the run-launcher blocks name real config
keys of those launchers (dagster-k8s, dagster-celery(-k8s), dagster-docker, dagster-aws 0.29,
the release line of the Dagster pin: keys read from their config schemas)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from agent_health.config import Config
from agent_health.connectors.base import connector_class
from agent_health.stores import open_store
from tests.conftest import ROOT
from tests.deploy.conftest import TEMPLATE

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)

K8S_JOB = {
    "job_image", "image_pull_policy", "image_pull_secrets", "service_account_name", "env_config_maps",
    "env_secrets", "env_vars", "volume_mounts", "volumes", "labels", "resources", "scheduler_name",
    "security_context", "instance_config_map", "postgres_password_secret", "dagster_home",
    "load_incluster_config", "kubeconfig_file", "fail_pod_on_run_failure", "job_namespace",
    "only_allow_user_defined_k8s_config_fields", "only_allow_user_defined_env_vars", "run_k8s_config",
}  # fmt: skip
LAUNCHERS: dict[tuple[str, str], set[str]] = {
    ("dagster_k8s", "K8sRunLauncher"): K8S_JOB,
    ("dagster_docker", "DockerRunLauncher"): {
        "image", "network", "networks", "registry", "env_vars", "container_kwargs",
    },
    ("dagster_aws.ecs", "EcsRunLauncher"): {
        "task_definition", "container_name", "secrets", "secrets_tag", "include_sidecars",
        "use_current_ecs_task_config", "run_task_kwargs", "propagate_tags", "task_definition_prefix",
        "env_vars", "run_resources", "run_ecs_tags", "execution_role_arn", "task_role_arn",
        "runtime_platform", "volumes", "mount_points", "repository_credentials",
    },
}  # fmt: skip


def blocks(lang: str) -> list[tuple[str, str]]:
    """(file name, code) of every fenced block of `lang` in README.md and docs/*.md."""
    return [(path.name, m.group(2)) for path in DOCS for m in FENCE.finditer(path.read_text()) if m.group(1) == lang]


# docs/extending.md configures the kinds of its example package: tests/core/test_plugins.py installs
# the package and runs that configuration
CONFIGS = [(name, code) for name, code in blocks("python") if "define_config(" in code and name != "extending.md"]
YAMLS = blocks("yaml")


def agent_modules(root: Any) -> None:
    """Write the agent modules the docs' configurations name into `root`: the python agent of
    docs/connectors.md as it gives it, the framework agents as tests/connectors ships them."""
    from tests.core.test_docs_examples import block

    (root / "my_agents").mkdir()
    (root / "my_agents" / "rca.py").write_text(block("connectors.md", "# my_agents/rca.py"))
    # the conversation example's `my_agents:chat`, importable beside the package's rca module
    (root / "my_agents" / "__init__.py").write_text(block("connectors.md", "# my_agents.py"))
    for name in ("sre_pydantic_ai", "sre_langgraph", "sre_openai_agents"):
        (root / f"{name}.py").write_text((ROOT / "tests/connectors/framework_agents" / f"{name}.py").read_text())


def test_the_docs_hold_the_examples_this_file_checks():
    names = [name for name, _ in CONFIGS]
    assert names.count("deploy.md") >= 2 and "configuration.md" in names and "traces.md" in names
    launchers = [y for _, y in YAMLS if "run_launcher:" in y]
    # no run-config block selects an executor: the code location does ($AGENT_HEALTH_EXECUTOR)
    assert len(launchers) == 3 and not any("execution:" in y for _, y in YAMLS)


@pytest.mark.parametrize("name, code", CONFIGS, ids=[f"{n}:{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_every_python_configuration_builds(name, code, monkeypatch, tmp_path):
    # referenced secrets and variables exist, as in a deployment
    named = (
        re.findall(r'(?:"env"|_env"):\s*"(\w+)"', code)
        + re.findall(r"os\.environ\[[\"'](\w+)[\"']\]", code)
        + re.findall(r"\$\{(\w+)\}", code)
    )
    for var in set(named):
        monkeypatch.setenv(var, "http://127.0.0.1:9/chat" if var.endswith("_URL") else f"test-value-of-{var}")
    agent_modules(tmp_path)  # importable as the connectors import them: from the working folder's path
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SRE_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # read when the module loads; never called
    namespace: dict[str, Any] = {}
    preamble = "from agent_health import *\nfrom agent_health import AgentSpec, define_config\n"
    exec(compile(preamble + code, name, "exec"), namespace)
    config: Config = namespace["config"]
    config = config.model_copy(update={"root": str(tmp_path)})
    for ref in config.agent_refs():  # what `agent-health agents --check` validates, per version
        agent = config.agent(ref)
        connector_class(agent.connector)(agent)
    store = open_store(config)  # validates the store settings; connects only on first use
    assert store.location


def test_the_per_agent_service_name_of_docs_traces_is_accepted_by_every_connector(tmp_path):
    from agent_health.config import AgentSpec

    settings = {
        "http": {"endpoint": "https://agents.example.com/invoke"},
        "agui": {"endpoint": "https://agents.example.com/agui"},
        "subprocess": {"command": ["python", "agent.py"]},
        "python": {"function": print},
    }
    for kind, own in settings.items():
        spec = AgentSpec(key="rca", connector=kind, settings={**own, "service_name": "rca-agent"}, traces=True)
        agent = Config(agents={"rca": spec}, root=str(tmp_path)).agent("rca")
        connector = connector_class(kind)(agent)
        assert connector.settings.service_name == "rca-agent", kind


def test_the_postgres_instance_blocks_are_the_tested_template():
    template = yaml.safe_load(TEMPLATE.read_text())
    shown = [yaml.safe_load(y) for name, y in YAMLS if name == "deploy.md"]
    shown = [doc for doc in shown if set(doc) <= set(template)]
    assert {"storage", "run_monitoring", "run_retries"} <= {key for doc in shown for key in doc}
    for doc in shown:
        assert doc == {k: template[k] for k in doc}
    assert template["storage"]["postgres"]["postgres_db"]["scheme"] == "postgresql+psycopg2"


@pytest.mark.parametrize("name, text", YAMLS, ids=[f"{n}:{i}" for i, (n, _) in enumerate(YAMLS)])
def test_every_yaml_block_parses_and_names_real_config_keys(name, text):
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict) and doc
    if "run_launcher" in doc:
        launcher = doc["run_launcher"]
        known = LAUNCHERS.get((launcher["module"], launcher["class"]))
        assert known is not None, f"{name}: unknown launcher {launcher['module']}.{launcher['class']}"
        unknown = set(launcher["config"]) - known
        assert not unknown, f"{name}: {launcher['class']} has no config keys {sorted(unknown)}"
    secret_words = ("password:", "secret_access_key", "api_key:", "token:")
    for line in text.splitlines():  # secrets only ever come from the environment or the platform
        if any(w in line.lower() for w in secret_words):
            assert "{env:" in line or "secret" in line.split(":", 1)[0] or "valueFrom" in line, line
