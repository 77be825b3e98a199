"""Context items of the shapes agent-health has reach the agent; any other key is an error naming
the file, the test and the key. Read as `{description, value}`, a context item such as
`{"type": "log", "content": "..."}` (agent-health's sample test cases) was sent to the agent as
two empty strings, with exit 0."""

from __future__ import annotations

import json

import pytest

from agent_health import load_tests
from tests.faults.lifecycle import budget, jsonl_results
from tests.support.cli import cli_in_process

SHAPES = "(a context item is {description, value}, or {type, content} as in agent-health's sample test cases)"

# An agent that answers with the context it was given.
ECHO_AGENT = "import json\n\ndef answer(prompt, context):\n    return json.dumps(context, sort_keys=True)\n"
CONFIG = (
    "from agent_health import define_config\n"
    "config = define_config(agents=[{'key': 'echo', 'connector': 'python',"
    " 'settings': {'function': 'echo:answer'}, 'versions': {'v1': {}}}], default_agent='echo@v1')\n"
)


def test_agent_health_sample_items_reach_the_agent_and_other_keys_are_errors(tmp_path, evals):
    (tmp_path / "echo.py").write_text(ECHO_AGENT)
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    exported = {"name": "exported", "initialPrompt": "p", "context": [{"type": "log", "content": "refused :5432"}]}
    evals("exported.json", json.dumps([exported]))
    evals("native.yaml", "tests:\n  - name: native\n    prompt: p\n    context: [{type: metrics, content: {cpu: 9}}]\n")
    evals(
        "code.eval.py",
        """
        from agent_health import expect, test

        @test("code", prompt="p", context=[{"type": "recent_changes", "content": "v2.3.1 deployed"}])
        async def code(agent):
            result = await agent.run()
            expect(result.output).to_contain("v2.3.1 deployed")

        @test("at run time", prompt="p")
        async def at_run_time(agent):
            await agent.run(context=[{"title": "Error log", "value": "x"}])

        @test("bad option", prompt="p", context=[{"kind": "log", "text": "x"}])
        async def bad_option(agent):
            await agent.run()
        """,
    )
    bad = {"name": "bad exported", "initialPrompt": "p", "context": [{"type": "log", "body": "x"}]}
    evals("bad.json", json.dumps([bad, {**exported, "name": "fine"}]))
    evals("bad.yaml", "tests:\n  - name: bad native\n    prompt: p\n    context: [{description: log, valu: x}]\n")
    p = cli_in_process("run", "evals", "--no-judge", "--reporter", "jsonl=r.jsonl", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 2, p.stdout + p.stderr  # load errors
    assert "Traceback" not in p.stdout + p.stderr
    results = jsonl_results(tmp_path / "r.jsonl")
    assert sorted(results) == ["at run time", "code", "exported", "fine", "native"]
    given = {name: json.loads(results[name]["run"]["output"]) for name in ("exported", "native", "code", "fine")}
    assert given["exported"] == given["fine"] == [{"description": "log", "value": "refused :5432"}]
    assert given["native"] == [{"description": "metrics", "value": '{"cpu": 9}'}]
    assert given["code"] == [{"description": "recent_changes", "value": "v2.3.1 deployed"}]
    assert results["code"]["status"] == "passed"
    runtime = results["at run time"]
    assert runtime["status"] == "errored" and "context[0]: unknown key 'title' in a context item" in runtime["error"]
    for line in (
        f"bad.json: case #1 'bad exported': context[0]: unknown key 'body' in a context item {SHAPES}",
        f"bad.yaml:2: case #1 'bad native': context[0]: unknown key 'valu' in a context item; did you mean 'value'? "
        f"{SHAPES}",
        f"code.eval.py:12: test 'bad option': context[0]: unknown keys 'kind', 'text' in a context item {SHAPES}",
    ):
        assert line in p.stdout, p.stdout


@pytest.mark.parametrize(
    ("item", "unknown"),
    [
        ({"type": "log", "text": "x"}, "'text'"),
        ({"description": "log", "content": "x"}, "'content'"),  # {description, value} misspelt
        ({"label": "x", "data": "y"}, "'data', 'label'"),
        ({"description": "log", "value": "x", "source": "s3"}, "'source'"),
    ],
    ids=["type and text", "description and content", "neither shape", "one key more"],
)
@pytest.mark.parametrize("where", ["native.yaml", "exported.json", "code.eval.py"])
def test_a_context_item_with_another_key_is_refused_in_every_format(tmp_path, evals, item, unknown, where):
    if where == "native.yaml":
        evals(where, f"tests:\n  - name: t\n    prompt: p\n    context: [{json.dumps(item)}]\n")
    elif where == "exported.json":
        context = [{"type": "a", "content": "b"}, item]
        evals(where, json.dumps([{"name": "t", "initialPrompt": "p", "context": context}]))
    else:
        evals(where, f"from agent_health import test\n\n@test('t', context=[{item!r}])\ndef t():\n    pass\n")
    evals("fine.yaml", "tests:\n  - name: fine\n    prompt: p\n    context: {type: log, content: x}\n")
    loaded = load_tests([tmp_path / "evals"])
    assert [t.case.id for t in loaded.tests] == ["fine::fine"]
    assert loaded.tests[0].case.context[0].model_dump() == {"description": "log", "value": "x"}
    [error] = [str(e) for e in loaded.errors]
    index = 1 if where == "exported.json" else 0
    assert error.startswith(where) and "'t'" in error
    assert f"context[{index}]: unknown key{'s' if ',' in unknown else ''} {unknown} in a context item" in error
