"""Headless Chromium from Debian's package, driven by Playwright (which cannot download its own
browsers here): fixture `browser` (a plugin of tests/conftest.py; one Chromium per test module)
and `Page`, a page that keeps its console errors and dialogs. This machine refuses outside
connections: without these flags Chromium keeps retrying them (updates, sync, QUIC)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.services import skip_or_fail

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


@pytest.fixture(scope="module")
def browser():
    """One Chromium for these tests (Playwright gives it a fresh temporary profile)."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        skip_or_fail("Debian's chromium package is not installed (/usr/bin/chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed (pip install playwright)")
    with sync_playwright() as pw:
        try:
            b = launch_chromium(pw)
        except Exception as exc:  # any launch failure skips (fails on CI) with its reason  # noqa: BLE001
            skip_or_fail(f"cannot start Chromium: {exc}")
        yield b
        b.close()


class Page:
    """A page with every console error, page error and dialog it produced."""

    def __init__(self, browser, path: Path, fragment: str = "", width: int = 1280):
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(path.as_uri() + fragment)

    def visible_keys(self) -> list[str]:
        return self.page.eval_on_selector_all(".test:not([hidden])", "els => els.map(e => e.id)")

    def attr_of_visible(self, attr: str) -> list[str]:
        return self.page.eval_on_selector_all(
            ".test:not([hidden])", f"els => els.map(e => e.getAttribute('data-{attr}'))"
        )

    def count_text(self) -> str:
        return self.page.text_content("#count") or ""

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc: object) -> None:
        self.page.close()
