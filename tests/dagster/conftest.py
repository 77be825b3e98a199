"""Fixtures for the Dagster tests: a tmp project (eval files + config), its pipeline, and a
temporary SQLite Dagster instance."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from tests.evalkit import write_config, write_evals

warnings.filterwarnings("ignore", module="dagster")


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    write_evals(tmp_path)
    write_config(tmp_path)
    return tmp_path


@pytest.fixture
def make_pipeline(project_dir: Path):
    """Build the code location for the tmp project; keyword args override resource fields."""
    from agent_health_dagster.defs.build import build_pipeline
    from agent_health_dagster.defs.resources import AgentHealthResource

    def make(**overrides):
        fields = {"config_path": str(project_dir / "agent_health_config.py"), **overrides}
        return build_pipeline(AgentHealthResource(**fields))

    return make


@pytest.fixture
def instance(tmp_path: Path):
    from dagster import instance_for_test

    home = tmp_path / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst
