"""The `agent-health` command line. Startup stays light: heavy modules load inside commands."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import click

from agent_health.config import load_config
from agent_health.errors import AgentHealthError
from agent_health.interrupts import Interrupted
from agent_health.lazy import deferred

# only when test code left threads running
if TYPE_CHECKING:
    import agent_health.session.process as process
else:
    process = deferred("agent_health.session.process")


class LazyGroup(click.Group):
    """A group whose commands are imported when they are used (or listed in --help), so
    `agent-health run` never loads the code of compare, report or schema."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, str] = {}  # command name -> "module:attribute"

    def add_lazy_command(self, name: str, target: str) -> None:
        self.lazy[name] = target

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attr = self.lazy[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
    ctx.ensure_object(dict)
    ctx.obj["config"] = load_config(config_path)


def _register() -> None:
    assert isinstance(cli, LazyGroup)
    cli.add_lazy_command("run", "agent_health.cli.run:run_command")
    cli.add_lazy_command("agents", "agent_health.cli.agents:agents")
    cli.add_lazy_command("compare", "agent_health.cli.compare:compare_command")
    cli.add_lazy_command("report", "agent_health.cli.report:report_command")
    cli.add_lazy_command("rejudge", "agent_health.cli.rejudge:rejudge_command")
    cli.add_lazy_command("schema", "agent_health.cli.schema:schema_command")
    cli.add_lazy_command("calibrate", "agent_health.cli.calibrate:calibrate_command")
    cli.add_lazy_command("serve", "agent_health.cli.serve:serve_command")
    cli.add_lazy_command("merge", "agent_health.cli.merge:merge_command")


_register()


def _leave(code: int) -> NoReturn:
    """Exit; threads test code left running do not keep the process alive (session.process)."""
    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        process.exit_leaving_threads(code)
    sys.exit(code)


def invoke(argv: Sequence[str] | None = None) -> int:
    """Run one `agent-health` command in this process and return its exit code, without leaving
    the process: what `main` runs before it exits (user errors become one clear line on stderr and
    code 2, Ctrl-C code 130). For callers that only need a command's output, exit code and files,
    such as a test suite; output goes to this process's `sys.stdout` and `sys.stderr` as they are
    when it is called. The process is the caller's: its working folder, environment, signal
    handlers (restored after a run) and the modules eval files and agents import stay as the
    command leaves them, and threads test code left running are not waited for (`main` does)."""
    try:
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="agent-health", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return 2
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except AgentHealthError as exc:
        click.echo(f"error: {exc}", err=True)
        return 2
    except (KeyboardInterrupt, Interrupted):
        click.echo("interrupted", err=True)
        return 130


def main(argv: list[str] | None = None) -> None:
    """Console entry point: `invoke(argv)`, then exit with its code."""
    _leave(invoke(argv))
