"""Text from tests (names, errors, agent output) made safe for where a reporter writes it: ANSI
escape codes removed, and characters the target cannot hold written as visible `\\xNN` / `\\uNNNN`
escapes. Test names and error texts come from users and agents: never trust them to be printable."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from agent_health.lazy import deferred

# rich's markup escaping loads with the first text a terminal reporter prints
if TYPE_CHECKING:
    import rich.markup as rich_markup
else:
    rich_markup = deferred("rich.markup")


# ANSI escape sequences (CSI such as colours, OSC such as hyperlinks, and two-character ones).
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# Characters XML 1.0 forbids (its Char production), lone surrogates included. Compiled on first
# use: the class spans the whole of Unicode and takes 4-5 ms to compile, which only the JUnit
# reporter needs.
_NOT_XML_PATTERN = "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
# What a terminal should not receive raw: C0/C1 controls (but tab and newline) and lone surrogates,
# which cannot even be encoded to UTF-8.
_NOT_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


@functools.cache
def _not_xml() -> re.Pattern[str]:
    return re.compile(_NOT_XML_PATTERN)


def xml_safe(text: str) -> str:
    """`text` with ANSI codes removed and every character XML 1.0 forbids written as `\\xNN`/`\\uNNNN`."""
    if not text:
        return text
    return _not_xml().sub(_escape, _ANSI.sub("", text))


def terminal_safe(text: str) -> str:
    """`text` for a terminal through rich: ANSI codes removed, controls and lone surrogates escaped,
    and rich's markup escaped so `[red]` in an error prints as itself."""
    if not text:
        return text
    return rich_markup.escape(_NOT_TERMINAL.sub(_escape, _ANSI.sub("", text)))
