"""Fixtures of the browser and tracking-server tests: headless Chromium from Debian, and
PostgreSQL's server binaries (``.ci/run`` installs both; ``REQUIRE_BROWSER``/``REQUIRE_POSTGRES``
turn a missing one from a skip into a failure)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.ui.stores import SCREENSHOTS

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="session")
def chromium():
    """Headless Chromium through Debian's chromedriver (``.ci/run`` installs both)."""
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        if os.environ.get("REQUIRE_BROWSER"):
            pytest.fail(f"{CHROMIUM} / {CHROMEDRIVER} missing: apt-get install chromium chromium-driver")
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    from selenium import webdriver  # only the browser test needs it
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1920,1080",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def postgres_binaries() -> None:
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")) and not shutil.which("initdb"):
        if os.environ.get("REQUIRE_POSTGRES"):
            pytest.fail("PostgreSQL server binaries missing: apt-get install postgresql")
        pytest.skip("PostgreSQL's server binaries (Debian package postgresql) are not installed")
