"""Headless Chromium from Debian's package, driven by Playwright (which cannot download its own
browsers here). This machine refuses outside connections: without these flags Chromium keeps
retrying them (updates, sync, QUIC)."""

from __future__ import annotations

from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch_chromium(playwright: Any) -> Any:
    """A Chromium browser with a fresh temporary profile (Playwright makes one per launch)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
