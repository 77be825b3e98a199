"""The reporter registry: `--reporter NAME[=FILE]` names a kind here (`summary` always runs).

A kind's target is a `reporters.base.Reporter` subclass, built as `cls(path)` where `path` is the
FILE given, or None for stdout. Third-party kinds come from the `agent_health.reporters` entry points.
"""

from agent_health.registry import Registry

REGISTRY = Registry(
    "reporter",
    "agent_health.reporters",
    {
        "json": "agent_health.reporters.json_report:JsonReporter",
        "jsonl": "agent_health.reporters.json_report:JsonLinesReporter",
        "junit": "agent_health.reporters.junit:JunitReporter",
        "html": "agent_health.reporters.html:HtmlReporter",
        "tap": "agent_health.reporters.tap:TapReporter",
        "github": "agent_health.reporters.github:GithubReporter",
    },
)

__all__ = ["REGISTRY"]
