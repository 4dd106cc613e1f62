"""The console's security page: SASL users (password shown once) and ACLs, per tenant."""

from __future__ import annotations

import pytest

from virtualclusters.security.models import Acl, SaslCredential

pytestmark = pytest.mark.django_db


def page(alice) -> str:
    return f"/clusters/{alice['cluster'].public_id}/security"


@pytest.fixture
def alice_browser(client, alice):
    client.force_login(alice["user"])
    return client


def test_it_creates_a_sasl_user_and_shows_the_password_once(alice_browser, alice):
    created = alice_browser.post(
        page(alice).replace("security", "sasl-users/new"), {"username": "web-app"}
    )
    assert created.status_code == 302 and created.url == page(alice)  # PRG
    response = alice_browser.get(created.url)
    assert response["Cache-Control"] == "no-store"
    password = response.context["new_password"]
    html = response.content.decode()
    assert password in html and "sasl.mechanism=SCRAM-SHA-512" in html
    again = alice_browser.get(page(alice)).content.decode()
    assert "web-app" in again and password not in again


def test_it_refuses_a_bad_sasl_user_with_a_message(alice_browser, alice):
    url = page(alice).replace("security", "sasl-users/new")
    response = alice_browser.post(url, {"username": "no spaces", "password": "short"})
    assert response.status_code == 400
    assert "A username is" in response.content.decode()
    assert not SaslCredential.objects.exists()


def test_it_adds_and_removes_acls(alice_browser, alice):
    url = page(alice).replace("security", "acls/new")
    form = {
        "principal": "User:web-app",
        "permission": "allow",
        "operation": "read",
        "resource_type": "topic",
        "pattern_type": "prefixed",
        "resource_name": "orders-",
        "host": "*",
    }
    assert alice_browser.post(url, form).status_code == 302
    acl = Acl.objects.get()
    assert (acl.pattern_type, acl.resource_name) == ("prefixed", "orders-")
    assert "User:web-app" in alice_browser.get(page(alice)).content.decode()
    bad = alice_browser.post(url, {**form, "principal": "web-app"})
    assert bad.status_code == 400 and "principal must look like" in bad.content.decode()
    delete = f"/clusters/{alice['cluster'].public_id}/acls/{acl.public_id}/delete"
    assert alice_browser.post(delete).status_code == 302
    assert not Acl.objects.exists()


def test_another_organization_sees_nothing(client, alice, bob):
    from virtualclusters.security.services import sasl_credential_create

    credential, _ = sasl_credential_create(cluster=alice["cluster"], username="mine")
    client.force_login(bob["user"])
    cid = alice["cluster"].public_id
    assert client.get(page(alice)).status_code == 404
    assert client.post(f"/clusters/{cid}/sasl-users/new", {"username": "x"}).status_code == 404
    delete = f"/clusters/{cid}/sasl-users/{credential.public_id}/delete"
    assert client.post(delete).status_code == 404
    own = f"/clusters/{bob['cluster'].public_id}/sasl-users/{credential.public_id}/delete"
    assert client.post(own).status_code == 404
    assert SaslCredential.objects.filter(pk=credential.pk).exists()


def test_anonymous_visitors_are_sent_to_log_in(client, alice):
    response = client.get(page(alice))
    assert response.status_code == 302 and "/login" in response["Location"]
