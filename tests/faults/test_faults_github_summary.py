"""Agent output in the GitHub job summary: a failed test's message quotes what the agent said, and
the summary embedded it as raw HTML and Markdown (`<img onerror>`, `<script>`, links and images
that load from anywhere). Every text from a result is now inert: the summary, rendered as GitHub
renders Markdown with its HTML, shows the characters and makes no element of them."""

from __future__ import annotations

import textwrap

from markdown_it import MarkdownIt

from tests.support.cli import cli_in_process

HOSTILE = (
    '<img src=x onerror="alert(1)"> <script>alert(document.cookie)</script> '
    "[click](javascript:alert(1)) ![pixel](https://tracker.example/p.png) | cell | **bold** `tick"
)

AGENT = f"""
def run(prompt):
    return {HOSTILE!r}
"""

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{"key": "echo", "connector": "python", "settings": {"function": "echo_agent:run"}, "versions": {"v1": {}}}],
    default_agent="echo@v1",
)
"""

EVAL = """
from agent_health import expect, test


@test("quotes the agent <b>loudly</b>", prompt="Diagnose why the payment service is failing.")
async def quotes(agent):
    result = await agent.run()
    expect(result.output).to_contain("payment")
"""


def test_the_job_summary_shows_agent_output_as_text_never_as_html(tmp_path, evals):
    (tmp_path / "echo_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    evals("hostile.eval.py", EVAL)
    summary = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(tmp_path)}
    proc = cli_in_process("run", "evals", "--no-store", "--reporter", "github", cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = summary.read_text()
    assert "onerror" in text  # the message is there, quoted
    page = MarkdownIt("commonmark", {"html": True}).enable("table").render(text).replace("&quot;", '"')
    for element in ("<img", "<script", "<a ", "<b>", "<strong>bold", "<td>cell"):
        assert element not in page, (element, page)
    # what a reader sees is what the agent wrote
    assert '&lt;img src=x onerror="alert(1)"&gt; &lt;script&gt;alert(document.cookie)&lt;/script&gt;' in page
    assert "[click](javascript:alert(1)) ![pixel](https://tracker.example/p.png) | cell | **bold** `tick" in page
