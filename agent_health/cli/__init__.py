"""The `agent-health` command (click). Its interface is the command line, not Python: nothing here
is public API (`agent_health.cli.main:cli` is the entry point pyproject.toml names)."""

__all__: list[str] = []
