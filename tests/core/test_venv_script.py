"""scripts/_venv.sh, which every script sources: the project's own modules are byte-compiled, so a
CLI start does not compile them again where PYTHONDONTWRITEBYTECODE is set (as in many containers,
where Python itself never writes them)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def stale_or_missing_bytecode(package: str) -> list[str]:
    out = []
    for source in (ROOT / package).rglob("*.py"):
        cached = Path(importlib.util.cache_from_source(str(source)))
        # a .pyc records its source's mtime and size (bytes 8-16): Python uses it only if they match
        if not cached.is_file():
            out.append(str(source.relative_to(ROOT)))
            continue
        header = cached.read_bytes()[8:16]
        stat = source.stat()
        if int.from_bytes(header[:4], "little") != int(stat.st_mtime) & 0xFFFFFFFF:
            out.append(str(source.relative_to(ROOT)))
    return out


def test_sourcing_the_venv_script_byte_compiles_the_project_even_without_bytecode_writing():
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run(["bash", "-c", "source scripts/_venv.sh"], cwd=ROOT, env=env, check=True, capture_output=True)
    assert stale_or_missing_bytecode("agent_health") == []
    assert stale_or_missing_bytecode("agent_health_dagster") == []
