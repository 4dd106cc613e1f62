"""The team page in a real browser: the owner invites a member, who joins through the
link and can look at the clusters but not change them."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import PASSWORD, make_cluster, make_org

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_invited_member_logs_in_with_the_members_limits(page, live_server, screenshots):
    owner, org = make_org("Team Co")
    cluster, _ = make_cluster("shared", org=org)
    page.goto("/login")
    page.get_by_label("Email").fill(owner.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="Team").click()
    page.get_by_label("Email").fill("mia@example.com")
    page.get_by_label("Role").select_option("member")
    page.get_by_role("button", name="Invite").click()
    link = page.locator("#invitation-link").inner_text()
    assert "/invite/" in link
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"team-{width}.png", full_page=True)
    page.get_by_role("button", name="Log out").click()

    page.goto("/invite/" + link.rsplit("/invite/", 1)[1])
    expect(page.get_by_role("heading", name="Join Team Co")).to_be_visible()
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Join").click()
    expect(page.get_by_role("link", name="shared")).to_be_visible()  # looks at the clusters
    page.goto(f"/clusters/{cluster.public_id}/")
    page.get_by_label("Key name").fill("sneaky")
    page.get_by_role("button", name="Create agent key").click()
    expect(page.get_by_role("heading", name="Your role does not allow this")).to_be_visible()
    assert cluster.agent_keys.filter(name="sneaky").count() == 0
