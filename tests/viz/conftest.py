"""A headless Chromium for the page tests, driven by Playwright; the tests skip with a clear
message where either is absent. Never downloads a browser: it uses Debian's /usr/bin/chromium
(apt-get install -y chromium chromium-driver) or $ATTNKIT_CHROMIUM."""

import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
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


def _fontconfig(folder: Path) -> dict[str, str]:
    """Environment that adds koreanize-matplotlib's NanumGothic to the system fonts, so that
    Hangul tokens show as Hangul (not boxes) in screenshots on machines without CJK fonts."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # it imports the deprecated distutils
            import koreanize_matplotlib.koreanize_matplotlib as km
    except Exception:
        return {}
    conf = folder / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>'
        '<include ignore_missing="yes">/etc/fonts/fonts.conf</include>'
        f"<dir>{km.get_font_path()}</dir>"
        "</fontconfig>\n"
    )
    return {"FONTCONFIG_FILE": str(conf)}


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: pip install playwright"
    )
    exe = _chromium()
    if exe is None:
        pytest.skip("Chromium not found: apt-get install -y chromium chromium-driver")
    with sync_api.sync_playwright() as pw:
        env = {**os.environ, **_fontconfig(tmp_path_factory.mktemp("fonts"))}
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True, env=env)
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
