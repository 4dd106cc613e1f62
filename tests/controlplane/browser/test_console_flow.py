"""The console in a real browser: sign up, create a cluster, get an agent command."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.core import mail
from playwright.sync_api import expect

from metadata_store.clusters import agent_key_authenticate
from tests.factories import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def finish_sign_up(page) -> None:
    """Open the link the sign-up mailed and choose the password."""
    page.goto(re.search(r"(/signup/\S+)", mail.outbox[-1].body).group(1))
    expect(page.get_by_role("heading", name="Finish signing up")).to_be_visible()
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()


def test_a_new_user_signs_up_creates_a_cluster_and_gets_an_agent_command(
    page, live_server, screenshots
):
    page.goto("/signup")
    expect(page.locator("body")).to_have_css("background-color", "rgb(245, 247, 250)")  # CSS
    page.get_by_label("Email").fill("erin@example.com")
    page.get_by_label("Organization name").fill("Erin Labs")
    page.screenshot(path=screenshots / "1-signup.png")
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name="Check your email")).to_be_visible()
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"1-signup-sent-{width}.png", full_page=True)
    finish_sign_up(page)
    page.set_viewport_size({"width": 1366, "height": 800})

    expect(page).to_have_url(live_server.url + "/")
    expect(page.get_by_role("heading", name="No clusters yet")).to_be_visible()
    page.screenshot(path=screenshots / "2-dashboard-empty.png")
    page.get_by_role("link", name="Create cluster", exact=True).click()

    page.get_by_label("Name", exact=True).fill("orders")
    page.get_by_label("Default partitions").fill("3")
    page.screenshot(path=screenshots / "3-new-cluster.png", full_page=True)
    page.get_by_role("button", name="Create cluster").click()

    expect(page.get_by_role("heading", name="orders", level=1)).to_be_visible()
    expect(page.get_by_text("Cluster orders created.")).to_be_visible()
    cluster_url = page.url
    page.get_by_label("Key name").fill("prod agents")
    page.get_by_role("button", name="Create agent key").click()

    key = page.locator("#agent-key-value").inner_text()
    assert agent_key_authenticate(key).name == "prod agents"
    command = (
        f"floe-agent --control-plane-url {settings.FLOE_PUBLIC_URL} --agent-key {key} "
        "--bucket-url file:///var/lib/floe"
    )
    expect(page.locator("#agent-command")).to_have_text(command)
    expect(page.locator("#agent-command")).to_be_visible()
    page.locator("[data-copy='#agent-command']").click()
    expect(page.locator("[data-copy='#agent-command']")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == command
    page.screenshot(path=screenshots / "4-agent-key-created.png", full_page=True)

    page.goto(cluster_url)  # the key is never shown again
    expect(page.get_by_role("cell", name="prod agents")).to_be_visible()
    assert key not in page.content()
    page.screenshot(path=screenshots / "5-cluster.png", full_page=True)

    page.get_by_role("link", name="Clusters").first.click()
    expect(page.get_by_role("link", name="orders")).to_be_visible()
    page.screenshot(path=screenshots / "6-dashboard.png")


def test_revoking_an_agent_key_asks_first(page, live_server):
    page.goto("/signup")
    page.get_by_label("Email").fill("frank@example.com")
    page.get_by_role("button", name="Sign up").click()
    finish_sign_up(page)
    page.goto("/clusters/new")
    page.get_by_label("Name", exact=True).fill("events")
    page.get_by_role("button", name="Create cluster").click()
    page.get_by_role("button", name="Create agent key").click()
    page.goto(page.url.removesuffix("agent-keys/new"))

    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("Active", exact=True)).to_be_visible()

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("revoked; agents using it are cut off")).to_be_visible()
    expect(page.get_by_text("Revoked", exact=True)).to_be_visible()
