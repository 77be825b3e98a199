"""Stopping a server or daemon process a test started."""

from __future__ import annotations

import subprocess


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """Ask the process to stop (SIGTERM); kill it when it has not within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
