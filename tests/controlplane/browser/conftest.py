"""Headless Chromium (Debian's, never a downloaded one) driven by Playwright's sync API."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.db import connections

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def chromium_executable() -> str:
    """Debian's ``chromium`` found on PATH. Without it a developer's run skips the browser
    tests, but a CI run (``CI=true``) fails them, as a missing PostgreSQL, Redis or kcat
    fails their tests: CI never passes by not looking."""
    found = shutil.which("chromium")
    if found:
        return found
    missing = "Debian's chromium is not installed (make system-deps)"
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"{missing}; CI=true runs every real part", pytrace=False)
    pytest.skip(missing)


@pytest.fixture
def page(live_server, monkeypatch):
    """A fresh browser page whose relative URLs go to the live server; a JavaScript
    error on any page fails the test.

    Playwright's sync API runs an event loop in this thread, so Django's guard against
    ORM calls from async code must be lifted while it runs. Everything stops before the
    test database is flushed.
    """
    chromium = chromium_executable()
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(
            base_url=live_server.url, viewport={"width": 1280, "height": 800}
        )
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
        context.set_default_timeout(5000)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        try:
            yield page
        finally:
            context.close()
            browser.close()
            # ORM calls made under Playwright's loop leave a connection open that would stop
            # the test database from being dropped at the end of the run.
            connections.close_all()
        assert errors == [], f"JavaScript errors on the page: {errors}"


def log_in(page, user) -> None:
    """Sign `page` in through the login form as `user` (a user, or its email) with the
    factories' password."""
    from tests.factories import PASSWORD

    page.goto("/login")
    page.get_by_label("Email").fill(user if isinstance(user, str) else user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


@pytest.fixture
def screenshots(tmp_path) -> Path:
    """Where screenshots go: ``FLOE_SCREENSHOT_DIR`` to keep them for a look, else a tmp dir."""
    folder = Path(os.environ.get("FLOE_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
