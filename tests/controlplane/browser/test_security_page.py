"""The Security page lists each SASL user's mechanisms: all three for a user made here with
a password, only its own for one made with Kafka's SCRAM admin API (KIP-554)."""

from __future__ import annotations

import hashlib

import pytest

from tests.controlplane.browser.conftest import log_in
from tests.factories import make_cluster, make_org
from virtualclusters.security.services import sasl_credential_create, scram_credentials_alter

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_security_page_shows_each_users_mechanisms(page, screenshots):
    owner, org = make_org("Secure Co")
    cluster, _ = make_cluster("secure", org=org)
    sasl_credential_create(cluster=cluster, username="console-user", password="a-long-password")
    salt = b"s" * 24
    salted = hashlib.pbkdf2_hmac("sha512", b"kafka-password", salt, 4096)
    upsert = {
        "name": "kafka-made-user",
        "mechanism": "SCRAM-SHA-512",
        "iterations": 4096,
        "salt": salt,
        "salted_password": salted,
    }
    assert scram_credentials_alter(cluster, [], [upsert])[0]["error_code"] == 0
    log_in(page, owner)
    page.goto(f"/clusters/{cluster.public_id}/security")
    rows = page.locator("#sasl-users tbody tr")
    assert rows.count() == 2
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in rows.nth(0).inner_text()
    assert rows.nth(1).inner_text().split("\t")[0].strip() == "kafka-made-user"
    assert "SCRAM-SHA-512" in rows.nth(1).inner_text()
    assert "PLAIN" not in rows.nth(1).inner_text()
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"security-{width}.png", full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the security page is {overflow}px wider than {width}px"
