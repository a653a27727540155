"""A headless Chromium for the page tests, driven by Playwright; the tests skip with a clear
message where either is absent. Never downloads a browser: it uses Debian's /usr/bin/chromium
(apt-get install -y chromium chromium-driver) or $ATTNKIT_CHROMIUM. The browser gets the system's
fonts only: the pages embed the glyphs they need (Hangul: viz/_page_fonts.py), and
test_page_fonts.py checks that they show on a machine with no Korean font."""

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def _chromium() -> str | None:
    for candidate in (os.environ.get("ATTNKIT_CHROMIUM"), "/usr/bin/chromium"):
        if candidate and os.path.exists(candidate):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: pip install playwright"
    )
    exe = _chromium()
    if exe is None:
        pytest.skip("Chromium not found: apt-get install -y chromium chromium-driver")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    pg = browser.new_page(viewport={"width": 900, "height": 700})
    try:
        yield pg
    finally:
        pg.close()
