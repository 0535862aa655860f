"""The documentation site `make docs` builds works opened from disk (file://, as the README says): every page
links to pages, not folders, and the search finds text, with no server and no network."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from helpers import ROOT, require, require_module

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HREF = re.compile(r'<a [^>]*href="([^"]+)"')

pytestmark = pytest.mark.slow  # builds the whole site (about 20 s)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_every_link_between_pages_names_a_file(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    folders: list[str] = []
    for page in pages:
        if page.name == "404.html":  # a server's page for a missing URL (root-relative links): never opened from disk
            continue
        for href in HREF.findall(page.read_text()):
            if href.startswith(("http:", "https:", "mailto:", "#")):
                continue
            target = (page.parent / unquote(href.split("#", 1)[0])).resolve()
            if not target.is_file():  # a folder URL opens the browser's directory listing from disk
                folders.append(f"{page.relative_to(site)} -> {href}")
    assert folders == []


def test_the_site_from_disk_in_headless_chromium(site: Path) -> None:
    require(None if CHROMIUM is not None else "no chromium installed (.ci/run installs Debian's)")
    sync_api = require_module("playwright.sync_api", "the docs site's browser test drives chromium with it")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], timeout=20_000)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.set_default_timeout(10_000)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: errors.append(f"fetched {r.url}") if not r.url.startswith("file:") else None)
            page.goto((site / "index.html").as_uri(), timeout=15_000)
            # a link in the navigation opens the page itself, not a folder
            page.locator("nav.md-nav--primary a[href$='guide/concepts.html']").first.click()
            page.wait_for_url(re.compile(r"/guide/concepts\.html$"))
            assert page.locator("article h1").first.inner_text().startswith("Concepts")
            # the search: a word of the task-agnostic page finds that page, and its result opens it
            page.locator("input.md-search__input").fill("BookCorpus")
            result = page.locator(".md-search-result__item a[href*='methods/task-agnostic.html']").first
            result.wait_for(state="visible")
            result.click()
            page.wait_for_url(re.compile(r"/methods/task-agnostic\.html"))
            assert "BookCorpus" in page.locator("article").inner_text()
        finally:
            browser.close()
    assert errors == []
