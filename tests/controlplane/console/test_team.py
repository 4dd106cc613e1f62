"""The team: invitations (link shown once, email sent), roles and their limits, removing
members, handing ownership on; another organization's members are out of reach."""

from __future__ import annotations

import re

import pytest
from django.core import mail

from team.members import invitation_account_create
from tenancy.models import Invitation, Membership
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def invite(client, email: str, role: str = "member") -> str:
    response = client.post("/team", {"email": email, "role": role})
    assert response.status_code == 302, response.content.decode()[:2000]
    page = client.get("/team").content.decode()
    return re.search(r"http://[^\s<\"]+/invite/[A-Za-z0-9_-]+", page).group(0)


def mailed_path(body: str, prefix: str) -> str:
    """The path of the link a mail carries."""
    return prefix + re.search(re.escape(prefix) + r"([^\s]+)", body).group(1)


def test_an_invited_member_joins_and_can_look_but_not_change(client, alice):
    client.force_login(alice["user"])
    link = invite(client, "dora@example.com")
    assert mail.outbox[-1].to == ["dora@example.com"] and link in mail.outbox[-1].body
    assert link not in client.get("/team").content.decode()  # shown once
    client.logout()

    path = "/invite/" + link.rsplit("/invite/", 1)[1]
    # No account yet: the link's holder is told a mail went; the mail's link makes one.
    mailed = client.post(path, {"password": ""})
    assert mailed.status_code == 200 and 'id="invitation-mailed"' in mailed.content.decode()
    assert not Membership.objects.filter(user__email="dora@example.com").exists()
    assert mail.outbox[-1].to == ["dora@example.com"]
    account = mailed_path(mail.outbox[-1].body, "/invite/account/")
    assert client.post(account, {"password": "short"}).status_code == 200  # too weak
    joined = client.post(account, {"password": PASSWORD})
    assert joined.status_code == 302
    assert client.post(account, {"password": PASSWORD}).status_code == 404  # used
    membership = Membership.objects.get(user__email="dora@example.com")
    assert membership.organization == alice["org"] and membership.role == "member"
    assert client.post(path, {"password": PASSWORD}).status_code == 404  # works once

    cluster_url = f"/clusters/{alice['cluster'].public_id}/"
    assert client.get(cluster_url).status_code == 200  # looks
    refused = client.post("/clusters/new", {"name": "x"})
    assert refused.status_code == 403 and "read-only" in refused.content.decode()
    assert client.post(cluster_url + "agent-keys/new", {"name": "k"}).status_code == 403
    assert client.post("/team", {"email": "e@example.com", "role": "admin"}).status_code == 403


def test_owners_change_roles_remove_members_and_hand_ownership_on(client, alice):
    client.force_login(alice["user"])
    invite(client, "ed@example.com", "admin")
    invitation = Invitation.objects.get(email="ed@example.com")
    ed = invitation_account_create(invitation=invitation, password=PASSWORD)
    ed_membership = Membership.objects.get(user=ed)
    assert ed_membership.role == "admin"
    client.post("/team/members/ed@example.com", {"action": "role", "role": "member"})
    ed_membership.refresh_from_db()
    assert ed_membership.role == "member"
    client.post("/team/members/ed@example.com", {"action": "transfer"})
    ed_membership.refresh_from_db()
    owner = Membership.objects.get(user=alice["user"])
    assert ed_membership.role == "owner" and owner.role == "admin"
    # alice, now an admin, cannot remove the owner
    client.post("/team/members/ed@example.com", {"action": "remove"})
    assert Membership.objects.filter(pk=ed_membership.pk).exists()


def test_another_organizations_members_are_out_of_reach(client, alice, bob):
    bob_membership = Membership.objects.get(user=bob["user"])
    client.force_login(alice["user"])
    response = client.post(f"/team/members/{bob['user'].email}", {"action": "remove"})
    assert response.status_code == 404
    assert Membership.objects.filter(pk=bob_membership.pk).exists()
    assert bob["user"].email not in client.get("/team").content.decode()


def test_the_rest_api_lists_invites_and_changes_members(api, alice, bob):
    admin = api(alice["admin"])
    invited = admin.post("/api/v1/invitations/", {"email": "fay@example.com", "role": "admin"})
    assert invited.status_code == 201 and "/invite/" in invited.json()["link"]
    invitation_account_create(
        invitation=Invitation.objects.get(email="fay@example.com"), password=PASSWORD
    )
    emails = [m["email"] for m in admin.get("/api/v1/members/").json()]
    assert emails == sorted([alice["user"].email, "fay@example.com"])
    changed = admin.patch("/api/v1/members/fay@example.com/", {"role": "member"})
    assert changed.status_code == 200 and changed.json()["role"] == "member"
    owner = admin.delete(f"/api/v1/members/{alice['user'].email}/")
    assert owner.status_code == 409  # the owner stays
    assert admin.delete("/api/v1/members/fay@example.com/").status_code == 204
    assert api(bob["admin"]).delete(f"/api/v1/members/{alice['user'].email}/").status_code == 404


# --- several organizations -----------------------------------------


def link_path(link: str) -> str:
    return "/invite/" + link.rsplit("/invite/", 1)[1]


def test_an_existing_account_joins_a_second_organization_and_switches(client, alice, bob):
    client.force_login(alice["user"])
    path = link_path(invite(client, bob["user"].email, "admin"))
    client.logout()
    joined = client.post(path, {"password": PASSWORD})
    assert joined.status_code == 302, joined.content.decode()[:2000]
    roles = dict(
        Membership.objects.filter(user=bob["user"]).values_list("organization__name", "role")
    )
    assert roles == {"bob-co": "owner", "alice-co": "admin"}
    # He arrives in the organization he joined; the nav switches between the two.
    page = client.get("/").content.decode()
    assert alice["cluster"].name in page and 'id="org-switch"' in page
    assert client.post("/orgs/switch", {"org": bob["org"].public_id}).status_code == 302
    page = client.get("/").content.decode()
    assert bob["cluster"].name in page and alice["cluster"].name not in page
    assert client.post("/orgs/switch", {"org": "org_nobodys"}).status_code == 404


def test_a_signed_in_invited_person_joins_with_one_button(client, alice, bob):
    client.force_login(alice["user"])
    path = link_path(invite(client, bob["user"].email))
    client.force_login(bob["user"])
    assert 'name="password"' not in client.get(path).content.decode()  # no password asked
    assert client.post(path).status_code == 302
    assert Membership.objects.get(organization=alice["org"], user=bob["user"]).role == "member"


def test_the_invitation_answers_alike_whether_the_email_has_an_account(client, alice, bob):
    client.force_login(alice["user"])
    # The inviter's answers: the same redirect and message for both.
    notes = []
    for email in (bob["user"].email, "nobody-yet@example.com"):
        response = client.post("/team", {"email": email, "role": "member"}, follow=True)
        notes.append([str(m) for m in response.context["messages"]])
    assert notes[0] == notes[1]
    invited = Invitation.objects.filter(organization=alice["org"]).values_list("email", flat=True)
    assert sorted(invited) == sorted([bob["user"].email, "nobody-yet@example.com"])
    client.logout()
    # The link's page and the answer to any password but the account's: the same, but
    # for the email itself — a strong one included, which used to make the new email an
    # account at once (and tell the link's holder there was none).
    pages, refusals = [], []
    for email in (bob["user"].email, "nobody-yet@example.com"):
        invitation = Invitation.objects.get(organization=alice["org"], email=email)
        pages.append(_invitation_page(client, invitation).replace(email, "EMAIL"))
        for password in ("short", "a-strong-passphrase-nobody-has", ""):
            answer = _invitation_post(client, invitation, password).replace(email, "EMAIL")
            refusals.append(answer)
            assert mail.outbox[-1].to == [email]
    assert pages[0] == pages[1]
    assert len(set(refusals)) == 1 and 'id="invitation-mailed"' in refusals[0]
    assert not Membership.objects.filter(user__username="nobody-yet@example.com").exists()
    assert not Membership.objects.filter(organization=alice["org"], user=bob["user"]).exists()


def _fresh_token(invitation) -> str:
    """A new link for an invitation (links are shown once; the test needs one again)."""
    import secrets

    from tenancy.ids import secret_digest

    token = secrets.token_urlsafe(32)
    Invitation.objects.filter(pk=invitation.pk).update(digest=secret_digest(token))
    return token


def _strip_csrf(html: str) -> str:
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", html)


def _invitation_page(client, invitation) -> str:
    return _strip_csrf(client.get(f"/invite/{_fresh_token(invitation)}").content.decode())


def _invitation_post(client, invitation, password: str) -> str:
    response = client.post(f"/invite/{_fresh_token(invitation)}", {"password": password})
    assert response.status_code == 200
    return _strip_csrf(response.content.decode())
