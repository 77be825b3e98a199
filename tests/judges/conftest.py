"""Fixtures for the judge tests (helpers live in helpers.py)."""

from __future__ import annotations

import pytest

from .helpers import ScriptedServer, chat, verdict_json


@pytest.fixture
def openai_server():
    server = ScriptedServer()
    server.default = lambda r: chat(verdict_json())
    yield server
    server.close()


@pytest.fixture
def bedrock_server():
    server = ScriptedServer()
    yield server
    server.close()
