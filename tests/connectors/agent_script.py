"""A small subprocess agent for the tests. Usage: agent_script.py MODE [PROMPT]; the prompt comes
from argv when given, else stdin."""

import json
import os
import subprocess
import sys
import time

mode = sys.argv[1]
prompt = sys.argv[2] if len(sys.argv) > 2 else sys.stdin.read()

if mode == "json":
    print(
        json.dumps(
            {
                "answer": f"json answer to {prompt}",
                "tool_calls": [{"name": "search_logs", "arguments": json.dumps({"q": prompt}), "result": "3 errors"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3},
            }
        )
    )
elif mode == "text":
    print(f"text answer to {prompt}")
elif mode == "jsonl":
    for ev in (
        {"type": "thinking", "content": "checking"},
        {"type": "tool_call", "tool": "query_metrics", "args": {"m": "cpu"}, "call_id": "a"},
        {"type": "tool_result", "tool": "query_metrics", "call_id": "a", "content": "cpu 99%"},
        {"type": "usage", "input_tokens": 40, "output_tokens": 10},
        {"type": "final", "output": f"jsonl answer to {prompt}"},
    ):
        print(json.dumps(ev), flush=True)
elif mode == "env":
    req = json.loads(prompt) if prompt.startswith("{") else {"prompt": prompt}
    print(
        json.dumps(
            {
                "answer": "env",
                "env": {k: os.environ.get(k) for k in ("TRACEPARENT", "AGENT_HEALTH_RUN_ID", "AGENT_MODE", "EXTRA")},
                "cwd": os.getcwd(),
                "request": req,
            }
        )
    )
elif mode == "files":
    folder = os.environ["AGENT_HEALTH_FILES_DIR"]
    found = {}
    for dirpath, _, names in os.walk(folder):
        for n in names:
            path = os.path.join(dirpath, n)
            with open(path, encoding="utf-8") as fh:
                found[os.path.relpath(path, folder)] = fh.read()
    print(json.dumps({"answer": "files", "files": found}))
elif mode == "fail":
    print("partial output")
    print("Traceback: model backend unreachable", file=sys.stderr)
    sys.exit(3)
elif mode == "hang":
    # A child in the same process group that would outlive a naive kill of the parent.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(os.environ["CHILD_PID_FILE"], "w") as fh:
        fh.write(str(child.pid))
    time.sleep(60)
elif mode == "latin1":
    sys.stdout.buffer.write("caf\u00e9".encode("latin-1"))
elif mode == "error-event":
    print(json.dumps({"type": "thinking", "content": "x"}))
    print(json.dumps({"type": "error", "message": "tool backend down"}))
