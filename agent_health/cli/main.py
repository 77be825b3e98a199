"""The `agent-health` command line. Startup stays light: heavy modules load inside commands."""

from __future__ import annotations

import sys

import click

from agent_health.errors import AgentHealthError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="AGENT_HEALTH_CONFIG",
    help="Configuration file (default: agent_health_config.py in this folder or a parent).",
)
@click.version_option(package_name="agent-health", prog_name="agent-health")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Evaluate AI agents: run eval files against agent versions."""
    from agent_health.config import load_config

    ctx.ensure_object(dict)
    ctx.obj["config"] = load_config(config_path)


def _register() -> None:
    from agent_health.cli.agents import agents
    from agent_health.cli.compare import compare_command
    from agent_health.cli.rejudge import rejudge_command
    from agent_health.cli.report import report_command
    from agent_health.cli.run import run_command
    from agent_health.cli.schema import schema_command

    cli.add_command(run_command)
    cli.add_command(agents)
    cli.add_command(compare_command)
    cli.add_command(report_command)
    cli.add_command(rejudge_command)
    cli.add_command(schema_command)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user errors become one clear line and exit code 2."""
    try:
        code = cli.main(args=argv, prog_name="agent-health", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except AgentHealthError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
