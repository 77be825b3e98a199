"""MkDocs hooks (mkdocs.yml `hooks:`): the site's home page is README.md and its contributing page
CONTRIBUTING.md, both at the repository root where GitHub shows them, outside docs/. Their links are
written for GitHub (`docs/running.md` from the root, `../README.md` from docs/), so they are rewritten
here to the site's paths; a link that still points nowhere fails `mkdocs build --strict`."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
# repository-root file -> its page on the site
ROOT_PAGES = {"README.md": "index.md", "CONTRIBUTING.md": "contributing.md"}
LINK = re.compile(r"\]\((?!https?:|#)([^)#\s]+)")


def site_path(target: str, from_root: bool) -> str:
    """A link target as written on GitHub -> the same target on the site."""
    if from_root:
        if target.startswith("docs/"):
            return target.removeprefix("docs/")
        return ROOT_PAGES.get(target, target)
    if target.startswith("../") and target.removeprefix("../") in ROOT_PAGES:
        return ROOT_PAGES[target.removeprefix("../")]
    return target


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for name, page in ROOT_PAGES.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / name)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    from_root = page.file.src_uri in ROOT_PAGES.values()
    return LINK.sub(lambda m: "](" + site_path(m.group(1), from_root), markdown)
