"""agent-health as a Dagster component: a `dg` project adds an eval root with one defs.yaml file

    type: agent_health_dagster.AgentHealthComponent
    attributes:
      eval_root: evals
      config_path: agent_health_config.py
      prefix: team_a

(docs/dagster.md#add-agent-health-to-your-own-dagster-project). Relative paths are relative to the
folder of the defs.yaml file. The executor is the project's (its Definitions or the run config):
a YAML file cannot hold one."""

from __future__ import annotations

from pathlib import Path

from dagster import Component, ComponentLoadContext, Definitions, Model, Resolvable
from pydantic import Field

from agent_health_dagster.embed import agent_health_definitions


class AgentHealthComponent(Component, Model, Resolvable):
    """The Definitions of one eval root (`agent_health_definitions`), from a defs.yaml file."""

    eval_root: str | None = Field(
        None, description="The eval files' folder (default: the configuration file's eval_root)."
    )
    config_path: str | None = Field(
        None, description="The agent-health configuration file (default: found as the CLI finds it)."
    )
    state_dir: str | None = Field(
        None, description="Where results are stored (default: the configuration file's state_dir)."
    )
    prefix: str = Field(
        "",
        description="Starts every asset key, job, sensor, schedule and the resource key of this eval root; "
        "give each eval root its own.",
    )

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        def here(value: str | None) -> str | None:
            return None if value is None else str(context.path / Path(value))

        return agent_health_definitions(
            here(self.eval_root),
            config_path=here(self.config_path),
            state_dir=here(self.state_dir),
            prefix=self.prefix,
        )
