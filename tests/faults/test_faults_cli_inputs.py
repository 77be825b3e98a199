"""What a user gives the command line, taken the wrong way: a file with an extension no loader knows
(`.eval.js`) was parsed as YAML ("invalid YAML"); `agent-health report` read the configuration's
store while `run` had stored under `AGENT_HEALTH_STORE`; a port given through `${VAR}` in an
endpoint was warned about as a short secret on every run."""

from __future__ import annotations

import json
import secrets as random_secrets

from agent_health.config.secrets import REDACTED
from tests.support.cli import cli_in_process
from tests.support.http import LocalHTTPServer, QuietHandler

ONE = """
from agent_health import test


@test("plain", prompt="Diagnose why the payment service is failing.")
async def plain(agent):
    await agent.run()
"""


def test_a_file_of_an_unknown_type_is_unsupported_not_invalid_yaml(tmp_path, evals):
    evals("ok.eval.py", ONE)
    evals("checkout.eval.js", "test('checkout', async ({ agent }) => { await agent.run(); });\n")
    evals("notes.py", "print('not an eval file')\n")
    proc = cli_in_process(
        "run",
        "evals/checkout.eval.js",
        "evals/notes.py",
        "evals/ok.eval.py",
        "--no-judge",
        "--reporter",
        "json=report.json",
        cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "YAML" not in out, out
    kinds = "eval files are *.eval.py, *.json, *.yaml, *.yml, *.jsonl"
    assert f"evals/checkout.eval.js: unsupported file type '.js': {kinds}" in out, out
    assert f"evals/notes.py: unsupported file type '.py': {kinds} (a Python eval file's name ends in .eval.py)" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["name"] for r in report["results"]] == ["plain"]  # the file that loads still runs


def test_report_reads_the_store_that_run_wrote_under_agent_health_store(tmp_path, evals):
    """`run` stored under `$AGENT_HEALTH_STORE`; `report` read the configuration's store and found
    no run there (or an older one)."""
    evals("ok.eval.py", ONE)
    env = {"AGENT_HEALTH_STORE": json.dumps({"type": "local", "settings": {"path": "elsewhere"}})}
    ran = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=report.json", cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = json.loads((tmp_path / "report.json").read_text())["eval_run_id"]
    assert (tmp_path / "elsewhere").is_dir() and not (tmp_path / ".agent_health" / "results").exists()
    proc = cli_in_process("report", "-o", "page.html", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"(1 test result(s) from run {run_id})" in proc.stdout, proc.stdout
    compared = cli_in_process("compare", run_id, run_id, "--json", cwd=tmp_path, env=env)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    off = cli_in_process("report", "-o", "page.html", cwd=tmp_path, env={"AGENT_HEALTH_STORE": "none"})
    assert off.returncode == 2, off.stdout + off.stderr
    assert "$AGENT_HEALTH_STORE turns storing off, so no run is stored to read" in off.stdout + off.stderr


class EchoPath(QuietHandler):
    """A REST agent answering with the path it was asked on."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"output": f"asked on {self.path}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


REST_CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{
        "key": "rest",
        "connector": "http",
        "settings": {"endpoint": "http://${FAULTS_HOST}:${FAULTS_PORT}/agent?key=${FAULTS_KEY}"},
        "versions": {"v1": {}},
    }],
    default_agent="rest@v1",
)
"""


def test_a_port_given_through_a_variable_is_an_address_not_a_short_secret(tmp_path, evals):
    """`http://${HOST}:${PORT}/...` warned on every run that the port (4-5 digits) is a secret too
    short to be searched for. The host and port of a URL are its address; a reference elsewhere in
    the URL (here a key in the query) is still a secret."""
    evals("smoke.yaml", "tests:\n  - name: outage\n    prompt: Diagnose why the payment service is failing.\n")
    (tmp_path / "agent_health_config.py").write_text(REST_CONFIG)
    key = "k-" + random_secrets.token_urlsafe(24)
    with LocalHTTPServer(EchoPath) as server:
        env = {"FAULTS_HOST": "127.0.0.1", "FAULTS_PORT": str(server.port), "FAULTS_KEY": key}
        proc = cli_in_process("run", "evals", "--no-judge", "--reporter", "json=report.json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "short or a common word" not in proc.stderr, proc.stderr
    [result] = json.loads((tmp_path / "report.json").read_text())["results"]
    assert result["run"]["output"] == f"asked on /agent?key={REDACTED}"
    assert key not in (tmp_path / "report.json").read_text()
