"""The team page in a real browser: the owner invites a member, who joins through the
link and can look at the clusters but not change them."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from playwright.sync_api import expect

from tests.controlplane.browser.conftest import log_in
from tests.factories import PASSWORD, make_cluster, make_org

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_invited_member_logs_in_with_the_members_limits(page, live_server, screenshots):
    owner, org = make_org("Team Co")
    cluster, _ = make_cluster("shared", org=org)
    log_in(page, owner)
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
    page.get_by_role("button", name="Join").click()  # no account: a mail goes to the email
    expect(page.locator("#invitation-mailed")).to_be_visible()
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"invitation-mailed-{width}.png", full_page=True)
    page.set_viewport_size({"width": 1366, "height": 800})
    account = re.search(r"(/invite/account/\S+)", mail.outbox[-1].body).group(1)
    page.goto(account)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Join").click()
    expect(page.get_by_role("link", name="shared")).to_be_visible()  # looks at the clusters
    page.goto(f"/clusters/{cluster.public_id}/")
    page.get_by_label("Key name").fill("sneaky")
    page.get_by_role("button", name="Create agent key").click()
    expect(page.get_by_role("heading", name="Your role does not allow this")).to_be_visible()
    assert cluster.agent_keys.filter(name="sneaky").count() == 0


def test_a_person_of_two_organizations_joins_switches_and_sees_their_keys(
    page, live_server, screenshots
):
    """An existing account accepts an invitation to a second organization with its own
    password, then switches between the two in the nav; the API keys page shows each
    key's owner, role and last use."""
    owner, org = make_org("Team Co")
    make_cluster("shared", org=org)
    guest, guest_org = make_org("Guest Co")
    make_cluster("guests-own", org=guest_org)
    log_in(page, owner.email)
    page.get_by_role("link", name="Team").click()
    page.get_by_label("Email").fill(guest.email)
    page.get_by_label("Role").select_option("admin")
    page.get_by_role("button", name="Invite").click()
    link = page.locator("#invitation-link").inner_text()
    page.get_by_role("button", name="Log out").click()

    page.goto("/invite/" + link.rsplit("/invite/", 1)[1])
    expect(page.get_by_role("heading", name="Join Team Co")).to_be_visible()
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"invitation-{width}.png", full_page=True)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Join").click()
    expect(page.get_by_role("link", name="shared")).to_be_visible()
    switcher = page.get_by_label("Organization")
    expect(switcher).to_have_value(org.public_id)

    page.goto("/api-keys")
    page.get_by_label("Name").fill("deploys")
    page.get_by_label("Role").select_option("member")
    page.get_by_role("button", name="Create API key").click()
    page.get_by_label("Name").fill("ci robot")
    page.get_by_label("Service account key").check()
    page.get_by_role("button", name="Create API key").click()
    rows = page.locator("table tbody tr")
    expect(rows.filter(has_text="deploys")).to_contain_text(guest.email)
    expect(rows.filter(has_text="deploys")).to_contain_text("Read-only")
    expect(rows.filter(has_text="ci robot")).to_contain_text("Service account")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"api-keys-{width}.png", full_page=True)

    page.set_viewport_size({"width": 1366, "height": 800})
    page.goto("/")
    switcher.select_option(guest_org.public_id)
    page.get_by_role("button", name="Switch").click()
    expect(page.get_by_role("link", name="guests-own")).to_be_visible()
    expect(page.get_by_role("link", name="shared")).to_have_count(0)
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"org-switcher-{width}.png", full_page=True)
