"""`agent-health agents`: list configured agents and their versions (secrets shown as references)."""

from __future__ import annotations

import json
from typing import Any

import click

import agent_health.connectors as connectors
from agent_health.config import load_config
from agent_health.config.secrets import display_value
from agent_health.errors import AgentHealthError


def agent_rows(config: Any, check: bool = False) -> list[dict[str, Any]]:
    """One row per agent version: ref, connector, where it runs, overrides, and (with `check`)
    whether its settings validate and its env references resolve."""
    rows = []
    default_ref = config.default_agent
    for spec in config.agents.values():
        default_version = spec.default_version or list(spec.versions)[-1]
        for version, overrides in spec.versions.items():
            ref = f"{spec.key}@{version}"
            settings = spec.resolve(version).settings
            row: dict[str, Any] = {
                "ref": ref,
                "connector": spec.connector,
                "target": display_value(
                    settings.get("endpoint")
                    or settings.get("command")
                    or settings.get("function")
                    or ("builtin:demo" if spec.connector == "demo" else "")
                ),
                "overrides": display_value(overrides),
                "default": ref == default_ref or (default_ref == spec.key and version == default_version),
                "description": spec.description,
            }
            if check:
                try:
                    agent = spec.resolve(version)
                    if spec.connector != "demo":
                        agent = agent.model_copy(update={"settings": {"root": config.root, **agent.settings}})
                    connectors.connector_class(spec.connector)(agent)
                    row["status"] = "ok"
                except AgentHealthError as exc:
                    row["status"] = f"error: {exc}"
            rows.append(row)
    return rows


@click.command("agents")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--check", is_flag=True, help="Validate each version's settings and env references (no requests).")
@click.pass_context
def agents(ctx: click.Context, as_json: bool, check: bool) -> None:
    """List agents and their versions (KEY@VERSION) from the configuration."""
    config = (ctx.obj or {}).get("config")
    try:
        if config is None:
            config = load_config()
        rows = agent_rows(config, check)
    except AgentHealthError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
    else:
        width = max(len(r["ref"]) for r in rows) if rows else 10
        for r in rows:
            mark = "*" if r["default"] else " "
            line = f"{mark} {r['ref']:<{width}}  {r['connector']:<10}  {r['target']}"
            if r["overrides"]:
                line += f"  overrides: {json.dumps(r['overrides'], default=str)}"
            if check:
                line += f"  [{r['status']}]"
            click.echo(line)
        click.echo(
            f"\n* default: {config.default_agent}"
            + (f"   (config: {config.source})" if config.source else "   (embedded defaults)")
        )
    if check and any(r["status"] != "ok" for r in rows):
        ctx.exit(2)  # a configuration problem, as `run` reports it
