"""The documentation site as a reader at 1280 px sees it: no code block cut off at its right edge (long
lines wrap), on the pages with the longest commands and outputs. Builds the site with mkdocs and opens
it in headless Chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[1]
PAGES = ("getting-started/index.html", "reference/api/index.html", "how-to/hf-datasets/index.html")


def test_no_code_block_is_cut_off_at_1280_px(tmp_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    pytest.importorskip("mkdocs", reason="the docs extra builds the site")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO / "bench")}
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site)],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    assert chromium and driver_path, "Debian's chromium and chromium-driver are needed (scripts/setup.sh installs them)"
    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,900")
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    browser = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        for page in PAGES:
            browser.get((site / page).as_uri())
            blocks = browser.execute_script(
                "return Array.from(document.querySelectorAll('.md-typeset pre > code'))"
                ".map(c => [c.scrollWidth, c.clientWidth, c.textContent.slice(0, 60)]);"
            )
            assert blocks, page
            cut = [text for scroll, client, text in blocks if scroll > client + 1]
            assert cut == [], f"{page}: code blocks wider than the page: {cut}"
    finally:
        browser.quit()
