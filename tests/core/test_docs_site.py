"""The docs site (mkdocs.yml: mkdocs-material, the API reference from docstrings by mkdocstrings)
builds with `mkdocs build --strict`: a link to a page or an anchor that does not exist, a page left
out of the navigation, or an API reference that does not resolve fails the suite. The home page is
the README and the links written for GitHub work on the site (scripts/docs_hooks.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import agent_health
from tests.conftest import ROOT


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(site)],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_docs_site_builds_strictly_with_the_readme_as_home_and_the_whole_public_api(tmp_path):
    site = tmp_path / "site"
    done = build(ROOT, site)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "WARNING" not in done.stderr, done.stderr[-5000:]
    # every page of docs/ is on the site (strict mode also fails on one left out of the nav)
    for page in (ROOT / "docs").glob("*.md"):
        assert (site / page.stem / "index.html").is_file(), page.name
    # the README is the home page, its links to docs/ rewritten to the site's pages
    home = (site / "index.html").read_text()
    assert "agent-health for Dagster" in home and 'href="concepts/"' in home
    assert 'href="docs/' not in home
    assert (site / "contributing" / "index.html").is_file()
    # the API reference holds every public name of agent_health, each with its anchor
    reference = (site / "reference" / "index.html").read_text()
    anchors = set(re.findall(r'id="(agent_health[\w.]*)"', reference))
    missing = sorted(n for n in agent_health.__all__ if f"agent_health.{n}" not in anchors)
    assert missing == [], f"docs/reference.md misses public names of agent_health: {missing}"
    assert "agent_health_dagster" in anchors
    # with docstrings, not only names
    assert "Stop the test body when this verdict failed" in reference  # Verdict.or_throw


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    """The strictness is real: a copy of the docs with one bad anchor and one page that does not
    exist fails, naming both."""
    root = tmp_path / "copy"
    root.mkdir()
    for name in ("mkdocs.yml", "README.md", "CONTRIBUTING.md"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "docs", root / "docs")
    (root / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "docs_hooks.py", root / "scripts" / "docs_hooks.py")
    # the reference page reads the packages from the copy's root: give it the real ones
    for package in ("agent_health", "agent_health_dagster"):
        (root / package).symlink_to(ROOT / package, target_is_directory=True)
    concepts = root / "docs" / "concepts.md"
    concepts.write_text(concepts.read_text() + "\nSee [running](running.md#no-such-section) and [x](gone.md).\n")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert "running.md#no-such-section" in done.stderr and "gone.md" in done.stderr, done.stderr[-3000:]
