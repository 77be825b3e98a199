"""JUnit output is well-formed XML that validates against the common JUnit XSD, whatever test
names and error texts hold (ANSI colour codes, control characters, lone surrogates)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from lxml import etree

from agent_health.model import RunReport, Signal, TestResult
from agent_health.reporters.junit import junit_xml, xml_safe
from tests.faults.conftest import cli, cli_bytes

XSD = etree.XMLSchema(etree.parse(str(Path(__file__).with_name("junit-10.xsd"))))

HOSTILE = [
    "\x1b[31mred\x1b[0m and \x1b[1;32mbold green\x1b[0m",
    "bell \x07 and \x01 start-of-heading",
    "nul \x00 byte",
    "vertical tab \x0b form feed \x0c",
    "lone surrogate \udc80 and \ud800 high",
    "non-characters \ufffe \uffff",
    "osc hyperlink \x1b]8;;https://example.com\x07link\x1b]8;;\x07",
    "escape alone \x1b and delete \x7f",
    "]]> cdata end & <tag> \"quotes\" 'apostrophes'",
    "\t tab \n newline \r return kept",
]

EVAL = r"""
from agent_health import test, expect


@test("\x1b[31mred name\x1b[0m with \x01 control", prompt="Diagnose why the payment service is failing.")
async def coloured(agent):
    r = await agent.run()
    expect(r.output).to_contain("\x1b[1mnever there\x1b[0m \x02")


@test("lone surrogate \udc80 name")
async def surrogate():
    raise RuntimeError("broken \udc80 byte \x1b[33mwarning\x1b[0m \x0b")


@test("plain")
async def plain():
    pass
"""


def validate(xml: bytes) -> etree._Element:
    doc = etree.fromstring(xml)  # raises on anything that is not well-formed XML 1.0
    XSD.assertValid(doc)
    return doc


def result(name: str, error: str, status: str = "failed") -> TestResult:
    return TestResult(
        test_id="s::t",
        name=name,
        suite="s",
        source_file="s.eval.py",
        agent="demo@v1",
        status=status,
        error=error,
        score=0.0,
        signals=(Signal(kind="deterministic", role="gate", name=name, passed=False, score=0.0, reasoning=error),),
    )


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("status", ["failed", "errored"])
def test_hostile_text_gives_valid_junit(text, status):
    now = time.time()
    report = RunReport(
        started_at=now, finished_at=now + 1, results=[result(text, text, status)], load_errors=[f"f.yaml: {text}"]
    )
    doc = validate(junit_xml(report).encode("utf-8"))
    case = doc.find("testsuite/testcase")
    assert case.get("name") == xml_safe(text) and "\x1b" not in case.get("name")
    tag = "failure" if status == "failed" else "error"
    assert case.find(tag).get("message") == xml_safe(text)
    assert xml_safe(text).replace("\r", "\n") in case.find(tag).text  # XML reads a bare CR in text as LF
    assert doc.find("testsuite[@name='load errors']/testcase/error").get("message") == xml_safe(f"f.yaml: {text}")


def test_xml_safe_removes_ansi_and_escapes_forbidden_characters():
    assert xml_safe("\x1b[31mred\x1b[0m") == "red"
    assert xml_safe("a\x01b\x00c") == "a\\x01b\\x00c"
    assert xml_safe("x\udc80y") == "x\\udc80y"
    assert xml_safe("tab\tnl\ncr\r") == "tab\tnl\ncr\r"
    assert xml_safe("emoji \U0001f600 stays") == "emoji \U0001f600 stays"


def test_cli_junit_file_and_stdout_validate(tmp_path, evals):
    evals("hostile.eval.py", EVAL)
    evals("broken.yaml", "tests: [{name: \x1b[31mbad\x1b[0m, prompt: 5, labels: {a: 1}}]\n")
    to_file = cli("run", "evals", "--no-judge", "--reporter", "junit=out/junit.xml", cwd=tmp_path)
    assert to_file.returncode == 2, to_file.stderr  # a load error: exit 2, the other tests still ran
    doc = validate((tmp_path / "out" / "junit.xml").read_bytes())
    suites = {s.get("name"): s for s in doc.findall("testsuite")}
    assert set(suites) == {"hostile.eval.py [demo@v2]", "load errors"}
    cases = {c.get("name"): c for c in suites["hostile.eval.py [demo@v2]"].findall("testcase")}
    assert set(cases) == {"red name with \\x01 control", "lone surrogate \\udc80 name", "plain"}
    assert cases["red name with \\x01 control"].find("failure") is not None
    error = cases["lone surrogate \\udc80 name"].find("error").get("message")
    assert "RuntimeError: broken \\udc80 byte warning \\x0b" in error
    props = {p.get("name"): p.get("value") for p in suites["hostile.eval.py [demo@v2]"].find("properties")}
    assert props["agent"] == "demo@v2" and props["suite"] == "hostile"
    assert "status: passed" in cases["plain"].find("system-out").text
    assert "broken.yaml" in suites["load errors"].find("testcase/error").get("message")

    validate(cli_bytes("run", "evals/hostile.eval.py", "--no-judge", "--reporter", "junit", cwd=tmp_path))
