"""The summary on the terminal: test names and error texts with ANSI codes, control characters,
lone surrogates or rich markup print as visible text, never as terminal commands or a crash."""

from __future__ import annotations

import pytest

from tests.faults.conftest import cli_bytes

HOSTILE = {
    "ansi": ("\\x1b[31mred\\x1b[0m and \\x1b]8;;http://x\\x07link\\x1b]8;;\\x07", b"\x1b", b"link"),
    "control": ("bell \\x07 and \\x01", b"\x07", b"bell \\x07 and \\x01"),
    "markup": ("[bold]not bold[/] and [/]", b"\x1b[1m", b"[bold]not bold[/] and [/]"),
    "surrogate": ("lone \\ud800 surrogate", b"\xed\xa0\x80", b"lone \\ud800 surrogate"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_names_and_errors_print_as_text(kind, evals, tmp_path):
    text, never, shown = HOSTILE[kind]
    evals(
        "hostile.eval.py",
        f"""
from agent_health import test, expect

@test("failed {text}")
def failed():
    expect("a").to_equal("b {text}")

@test("errored {text}")
def errored():
    raise RuntimeError("raw {text}")  # an error text reaches the summary as it is
""",
    )
    out = cli_bytes("run", "evals", "--no-store", "-v", cwd=tmp_path)
    out.decode("utf-8")  # valid UTF-8 whatever the test held
    assert never not in out and b"Traceback" not in out
    assert shown in out, out
