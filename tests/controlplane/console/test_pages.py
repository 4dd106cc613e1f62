"""The web console, page by page, through Django's test client (alice and bob are two
organizations; see tests/conftest.py)."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import override_settings

from metadata_store.clusters import agent_key_authenticate
from metadata_store.topics import topic_create
from team.models import ApiKey
from team.services import user_signup
from tenancy.models import Membership
from tests import factories
from virtualclusters.models import AgentKey, VirtualCluster
from virtualclusters.services import agent_key_create

pytestmark = pytest.mark.django_db


def field_errors(response, name: str) -> list[str]:
    """The error lines rendered inside the form field whose input is called ``name``."""
    for block in response.content.decode().split('<div class="field')[1:]:
        if f'name="{name}"' in block:
            return [html.unescape(e) for e in re.findall(r'<p class="error">(.*?)</p>', block)]
    raise AssertionError(f"no field {name!r} on the page")


def signed_in(client, tenant: dict):
    client.force_login(tenant["user"])
    return client


def cluster_url(cluster: VirtualCluster, action: str = "") -> str:
    return f"/clusters/{cluster.public_id}/{action}"


# --- sign-up, log-in, log-out ---------------------------------------------------------


def test_it_signs_up_through_a_mailed_link_and_lands_on_the_dashboard_signed_in(client):
    response = client.post("/signup", {"email": " Carol@Example.com ", "organization_name": "Acme"})
    assert response.status_code == 200 and 'id="signup-sent"' in response.content.decode()
    assert not get_user_model().objects.filter(username="carol@example.com").exists()
    assert mail.outbox[-1].to == ["carol@example.com"]
    path = re.search(r"http://[^/]+(/signup/\S+)", mail.outbox[-1].body).group(1)
    weak = client.post(path, {"password": "short"})
    assert weak.status_code == 200
    assert any("too short" in e for e in field_errors(weak, "password"))
    finished = client.post(path, {"password": factories.PASSWORD})
    assert finished.status_code == 302 and finished.url == "/"
    user = get_user_model().objects.get(username="carol@example.com")
    assert Membership.objects.get(user=user).organization.name == "Acme"
    dashboard = client.get("/")
    assert dashboard.status_code == 200
    assert "Welcome to Floe" in dashboard.content.decode()
    assert "No clusters yet" in dashboard.content.decode()
    client.logout()
    again = client.post(path, {"password": factories.PASSWORD})  # the link made its account
    assert again.status_code == 200 and "already exists" in again.content.decode()
    assert client.get("/signup/not-a-link").status_code == 404


def test_sign_up_answers_alike_whether_the_email_has_an_account(client):
    """The form must not tell whoever fills it in that an email has a Floe account: both
    get the same page; the mail says which (an account's owner is told to log in)."""
    user_signup(email="taken@example.com", password=factories.PASSWORD)
    pages = []
    for email in ("taken@example.com", "free@example.com"):
        response = client.post("/signup", {"email": email, "organization_name": "X"})
        assert response.status_code == 200
        pages.append(
            re.sub(
                r'name="csrfmiddlewaretoken" value="[^"]+"', "", response.content.decode()
            ).replace(email, "EMAIL")
        )
        assert mail.outbox[-1].to == [email]
    assert pages[0] == pages[1]
    assert "/login" in mail.outbox[-2].body and "/signup/" not in mail.outbox[-2].body
    assert "/signup/" in mail.outbox[-1].body
    assert "_auth_user_id" not in client.session


def test_sign_up_refuses_a_malformed_email_next_to_its_field(client):
    response = client.post("/signup", {"email": "not-an-email"})
    assert response.status_code == 200
    assert field_errors(response, "email") == ["Enter a valid email address."]
    assert not mail.outbox


def test_it_logs_in_with_the_email_in_any_case(client, alice):
    response = client.post(
        "/login", {"username": alice["user"].email.upper(), "password": factories.PASSWORD}
    )
    assert response.status_code == 302 and response.url == "/"
    assert client.get("/").status_code == 200


def test_it_refuses_a_wrong_password_with_a_message(client, alice):
    response = client.post("/login", {"username": alice["user"].email, "password": "wrong-one"})
    assert response.status_code == 200
    assert "do not match an account" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_log_out_is_a_post_and_ends_the_session(client, alice):
    signed_in(client, alice)
    assert client.get("/logout").status_code == 405
    response = client.post("/logout")
    assert response.status_code == 302 and response.url == "/login"
    assert client.get("/").status_code == 302


@pytest.mark.parametrize("url", ["/", "/clusters/new", "/api-keys", "/clusters/vci_x/"])
def test_pages_send_strangers_to_the_log_in_page(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith("/login?next=")


# --- dashboard -------------------------------------------------------------------------


def test_the_dashboard_lists_only_the_users_own_clusters(client, alice, bob):
    topic_create(cluster=alice["cluster"], name="orders", num_partitions=3)
    page = signed_in(client, alice).get("/").content.decode()
    assert alice["cluster"].public_id in page and "alice-cluster" in page
    assert bob["cluster"].public_id not in page and "bob-cluster" not in page
    assert re.search(r'<td class="num">1</td>', page)  # alice's one topic


def test_the_dashboard_query_count_does_not_grow_with_clusters(client, alice):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    signed_in(client, alice)

    def queries() -> int:
        client.get("/")  # warm: caches the suite's order may or may not have filled
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/").status_code == 200
        return len(captured)

    one = queries()
    for n in range(5):
        factories.make_cluster(f"extra-{n}", org=alice["org"])
    # The same count with six clusters as with one; 4 for the page and 3 for the plan's cap
    # banner (its plan and month's bytes, cached 30 s) when nothing is cached.
    assert queries() == one <= 7


# --- cross-tenant ----------------------------------------------------------------------


def test_it_hides_bobs_cluster_from_alice(client, alice, bob):
    signed_in(client, alice)
    cluster = bob["cluster"]
    assert client.get(cluster_url(cluster)).status_code == 404
    assert client.post(cluster_url(cluster, "rename"), {"name": "mine"}).status_code == 404
    assert client.post(cluster_url(cluster, "config"), {"default_partitions": 9}).status_code == 404
    assert client.post(cluster_url(cluster, "agent-keys/new"), {"name": "x"}).status_code == 404
    delete = client.post(cluster_url(cluster, "delete"), {"confirm_name": "bob-cluster"})
    assert delete.status_code == 404
    cluster.refresh_from_db()
    assert cluster.name == "bob-cluster" and cluster.default_partitions == 1
    assert cluster.agent_keys.count() == 1


def test_alice_cannot_revoke_bobs_agent_key(client, alice, bob):
    bobs_key = bob["cluster"].agent_keys.get()
    signed_in(client, alice)
    for cluster in (bob["cluster"], alice["cluster"]):
        url = cluster_url(cluster, f"agent-keys/{bobs_key.public_id}/revoke")
        assert client.post(url).status_code == 404
    bobs_key.refresh_from_db()
    assert bobs_key.revoked_at is None


def test_alice_cannot_revoke_bobs_api_key(client, alice, bob):
    bobs_key = ApiKey.objects.for_org(bob["org"]).first()
    signed_in(client, alice)
    assert client.post(f"/api-keys/{bobs_key.public_id}/revoke").status_code == 404
    assert bob["org"].name not in client.get("/api-keys").content.decode()
    bobs_key.refresh_from_db()
    assert bobs_key.revoked_at is None


# --- creating and changing clusters ----------------------------------------------------

VALID_CLUSTER = {
    "name": "prod",
    "auto_create_topics": "on",
    "default_partitions": "6",
    "retention_value": "12",
    "retention_unit": "hours",
    "max_flush_age_ms": "100",
    "max_flush_bytes": str(4 * 1024 * 1024),
}


def test_the_create_form_offers_the_defaults(client, alice):
    response = signed_in(client, alice).get("/clusters/new")
    form = response.context["form"]
    assert form["default_partitions"].value() == 1
    assert (form["retention_value"].value(), form["retention_unit"].value()) == (7, "days")
    assert form["auto_create_topics"].value() is True


def test_it_creates_a_cluster_and_shows_its_page(client, alice):
    response = signed_in(client, alice).post("/clusters/new", VALID_CLUSTER)
    cluster = VirtualCluster.objects.for_org(alice["org"]).get(name="prod")
    assert response.status_code == 302 and response.url == cluster_url(cluster)
    assert cluster.config() == {
        "auto_create_topics": True,
        "default_partitions": 6,
        "default_retention_ms": 12 * 3600 * 1000,
        "acls_enabled": False,
        "max_flush_age_ms": 100,
        "max_flush_bytes": 4 * 1024 * 1024,
        "consumer_session_timeout_ms": 45_000,  # left empty: Kafka's defaults
        "consumer_heartbeat_interval_ms": 5_000,
        "ripcord": False,
        "default_topic_type": "standard",  # left empty: standard
        "jobs_agent_groups": [],  # left empty: any group
    }
    page = client.get(response.url).content.decode()
    assert "Cluster prod created." in page
    assert cluster.public_id in page and "No agent yet" in page  # no agent, no bootstrap


def test_a_clusters_page_shows_its_own_agents_address_never_another_orgs(client, alice, bob):
    from tests.metadata_store.conftest import AgentApi

    AgentApi(bob["agent_key"])("heartbeat", {"agent_id": "b1", "host": "10.9.9.9", "port": 9092})
    page = signed_in(client, alice).get(cluster_url(alice["cluster"])).content.decode()
    assert "10.9.9.9" not in page and "No agent yet" in page
    assert "floe-agent --control-plane-url" in page  # how to start one
    AgentApi(alice["agent_key"])("heartbeat", {"agent_id": "a1", "host": "10.0.0.8", "port": 9093})
    page = client.get(cluster_url(alice["cluster"])).content.decode()
    assert '<code id="bootstrap">10.0.0.8:9093</code>' in page and "No agent yet" not in page


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"name": ""}, "name", "This field is required."),
        ({"name": "alice-cluster"}, "name", "already exists"),
        ({"default_partitions": "0"}, "default_partitions", "Must be between"),
        ({"max_flush_age_ms": "soon"}, "max_flush_age_ms", "Enter a whole number."),
        ({"max_flush_age_ms": "1"}, "max_flush_age_ms", "Must be between 5 and 60000."),
        ({"max_flush_bytes": "10"}, "max_flush_bytes", "Must be between"),
        ({"retention_value": "-5"}, "retention_value", "Must be between -1"),
        ({"bucket_url": "s3://KEY:secret@b"}, "bucket_url", "without credentials"),
    ],
)
def test_create_cluster_shows_bad_values_next_to_their_fields(
    client, alice, change, field, message
):
    response = signed_in(client, alice).post("/clusters/new", {**VALID_CLUSTER, **change})
    assert response.status_code == 200
    assert any(message in error for error in field_errors(response, field)), response.content
    assert not VirtualCluster.objects.filter(name="prod").exists()


def test_a_cluster_created_with_its_bucket_shows_it(client, alice):
    response = signed_in(client, alice).post(
        "/clusters/new", {**VALID_CLUSTER, "bucket_url": "s3://prod-data?region=eu-west-1"}
    )
    assert VirtualCluster.objects.get(name="prod").bucket_url == "s3://prod-data?region=eu-west-1"
    assert "s3://prod-data?region=eu-west-1" in client.get(response.url).content.decode()


def test_retention_of_minus_one_keeps_messages_forever(client, alice):
    signed_in(client, alice).post(
        "/clusters/new", {**VALID_CLUSTER, "retention_value": "-1", "retention_unit": "days"}
    )
    assert VirtualCluster.objects.get(name="prod").default_retention_ms == -1


def test_it_updates_the_configuration(client, alice):
    cluster = alice["cluster"]
    data = {
        **VALID_CLUSTER,
        "acls_enabled": "on",
        "ripcord": "on",
        "retention_value": "3",
        "retention_unit": "days",
    }
    del data["auto_create_topics"]  # an unticked box is absent from the POST
    response = signed_in(client, alice).post(cluster_url(cluster, "config"), data)
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert cluster.acls_enabled is True and cluster.auto_create_topics is False
    assert cluster.ripcord is True
    assert cluster.default_retention_ms == 3 * 24 * 3600 * 1000
    form = client.get(cluster_url(cluster)).context["config_form"]
    assert (form["retention_value"].value(), form["retention_unit"].value()) == (3, "days")


def test_a_bad_configuration_is_shown_inline_and_not_saved(client, alice):
    cluster = alice["cluster"]
    response = signed_in(client, alice).post(
        cluster_url(cluster, "config"), {**VALID_CLUSTER, "default_partitions": "0"}
    )
    assert response.status_code == 200
    assert field_errors(response, "default_partitions")
    cluster.refresh_from_db()
    assert cluster.default_partitions == 1


def test_it_renames_a_cluster_but_not_onto_another_name(client, alice):
    factories.make_cluster("taken", org=alice["org"])
    cluster = alice["cluster"]
    signed_in(client, alice)
    clash = client.post(cluster_url(cluster, "rename"), {"name": "taken"})
    assert "already exists" in field_errors(clash, "name")[0]
    assert client.post(cluster_url(cluster, "rename"), {"name": "renamed"}).status_code == 302
    cluster.refresh_from_db()
    assert cluster.name == "renamed"


def test_delete_requires_the_typed_name(client, alice):
    cluster = alice["cluster"]
    signed_in(client, alice)
    wrong = client.post(cluster_url(cluster, "delete"), {"confirm_name": "alice"})
    assert wrong.status_code == 200
    assert field_errors(wrong, "confirm_name") == ["Type the cluster's name to confirm deletion."]
    assert VirtualCluster.objects.filter(pk=cluster.pk).exists()
    right = client.post(cluster_url(cluster, "delete"), {"confirm_name": "alice-cluster"})
    assert right.status_code == 302 and right.url == "/"
    assert not VirtualCluster.objects.filter(pk=cluster.pk).exists()
    assert "Cluster alice-cluster deleted." in client.get("/").content.decode()


def test_the_cluster_page_lists_topics(client, alice):
    topic_create(cluster=alice["cluster"], name="payments", num_partitions=4)
    page = signed_in(client, alice).get(cluster_url(alice["cluster"])).content.decode()
    assert re.search(r"payments</a></td><td class=\"num\">4</td><td class=\"num\">0</td>", page)


# --- agent keys --------------------------------------------------------------------------


@override_settings(FLOE_PUBLIC_URL="https://floe.example.com")
def test_a_new_agent_key_and_its_command_are_shown_once(client, alice):
    cluster = alice["cluster"]
    created = signed_in(client, alice).post(
        cluster_url(cluster, "agent-keys/new"), {"name": "prod"}
    )
    assert created.status_code == 302 and created.url == cluster_url(cluster)  # PRG
    response = client.get(created.url)
    assert response["Cache-Control"] == "no-store"
    plaintext = response.context["new_agent_key"].plaintext
    key = agent_key_authenticate(plaintext)
    assert key.cluster == cluster and key.name == "prod"
    page = html.unescape(response.content.decode())
    assert (
        f"floe-agent --control-plane-url https://floe.example.com --agent-key {plaintext} "
        "--bucket-url file:///var/lib/floe"
    ) in page
    assert (
        f"FLOE_CONTROL_PLANE_URL=https://floe.example.com FLOE_AGENT_KEY={plaintext} "
        "FLOE_BUCKET_URL=file:///var/lib/floe floe-agent"
    ) in page
    again = client.get(cluster_url(cluster)).content.decode()
    assert plaintext not in again
    assert key.display_prefix in again  # listed, by its prefix only


def test_agent_key_names_are_optional_and_numbered(client, alice):
    signed_in(client, alice)
    for expected in ("agent key", "agent key 2"):
        url = cluster_url(alice["cluster"], "agent-keys/new")
        response = client.post(url, follow=True)
        assert response.context["new_agent_key"].key.name == expected


def test_reloading_after_creating_an_agent_key_creates_no_second_one(client, alice):
    signed_in(client, alice)
    response = client.post(cluster_url(alice["cluster"], "agent-keys/new"), {"name": "p"})
    assert client.get(response.url).context["new_agent_key"] is not None
    reloaded = client.get(response.url)  # what a browser's reload does after a redirect
    assert reloaded.context["new_agent_key"] is None
    assert alice["cluster"].agent_keys.filter(name="p").count() == 1


def test_it_refuses_a_second_active_agent_key_with_the_same_name(client, alice):
    signed_in(client, alice)
    url = cluster_url(alice["cluster"], "agent-keys/new")
    assert client.post(url, {"name": "prod"}).status_code == 302
    response = client.post(url, {"name": "prod"})
    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert alice["cluster"].agent_keys.filter(name="prod").count() == 1


def test_an_agent_key_in_use_shows_when_it_was_last_used(client, alice):
    key = alice["cluster"].agent_keys.get()
    assert key.last_used_at is None
    assert agent_key_authenticate(alice["agent_key"]) == key  # what every agent call does
    key.refresh_from_db()
    assert key.last_used_at is not None
    page = signed_in(client, alice).get(cluster_url(alice["cluster"])).content.decode()
    assert "never" not in page.split('id="agent-keys"')[1].split("</section>")[0]


def test_it_revokes_an_agent_key(client, alice):
    key, _ = agent_key_create(cluster=alice["cluster"], name="old")
    signed_in(client, alice)
    response = client.post(cluster_url(alice["cluster"], f"agent-keys/{key.public_id}/revoke"))
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    page = client.get(response.url).content.decode()
    assert "Agent key old revoked" in page and "Revoked" in page


def test_active_agent_keys_are_listed_before_revoked_ones(client, alice):
    old, _ = agent_key_create(cluster=alice["cluster"], name="old")
    signed_in(client, alice).post(
        cluster_url(alice["cluster"], f"agent-keys/{old.public_id}/revoke")
    )
    agent_key_create(cluster=alice["cluster"], name="new")
    keys = client.get(cluster_url(alice["cluster"])).context["agent_keys"]
    assert [k.name for k in keys] == ["new", "test agent", "old"]


def test_revoking_is_a_post(client, alice):
    key = alice["cluster"].agent_keys.get()
    signed_in(client, alice)
    url = cluster_url(alice["cluster"], f"agent-keys/{key.public_id}/revoke")
    assert client.get(url).status_code == 405
    assert AgentKey.objects.get(pk=key.pk).revoked_at is None


# --- API keys ----------------------------------------------------------------------------


def test_a_new_api_key_is_shown_once_then_listed_by_prefix(client, alice):
    signed_in(client, alice)
    created = client.post("/api-keys/new", {"name": "terraform", "role": "member"})
    assert created.status_code == 302 and created.url == "/api-keys"  # PRG
    response = client.get(created.url)
    assert response["Cache-Control"] == "no-store"
    plaintext = response.context["new_key"]["plaintext"]
    assert plaintext in response.content.decode()
    key = ApiKey.objects.for_org(alice["org"]).get(name="terraform")
    assert key.role == "member" and key.owner == alice["user"] and not key.service_account
    page = client.get("/api-keys").content.decode()
    assert plaintext not in page
    assert key.display_prefix in page and "Read-only" in page and alice["user"].email in page


def test_an_api_key_needs_a_name(client, alice):
    response = signed_in(client, alice).post("/api-keys/new", {"name": "", "role": "admin"})
    assert field_errors(response, "name") == ["This field is required."]


def test_it_refuses_a_second_active_api_key_with_the_same_name(client, alice):
    signed_in(client, alice)
    assert client.post("/api-keys/new", {"name": "ci", "role": "admin"}).status_code == 302
    response = client.post("/api-keys/new", {"name": "ci", "role": "admin"})
    assert field_errors(response, "name") == ["An active API key with this name already exists."]
    assert ApiKey.objects.for_org(alice["org"]).filter(name="ci").count() == 1


def test_it_revokes_an_api_key(client, alice):
    key = ApiKey.objects.for_org(alice["org"]).first()
    signed_in(client, alice)
    response = client.post(f"/api-keys/{key.public_id}/revoke")
    assert response.status_code == 302 and response.url == "/api-keys"
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert f"API key {key.name} revoked." in client.get("/api-keys").content.decode()


def test_the_cluster_page_shows_what_live_agents_journaled_and_not_yet_sequenced(client, alice):
    """The Unsequenced stat sums the live agents' last reported journal backlog and shows
    the oldest entry's age; a gone agent's report does not count."""
    from datetime import timedelta

    from django.utils import timezone

    from metadata_store.models import Agent

    cluster = alice["cluster"]
    now = timezone.now()
    for agent_id, backlog, oldest, seen in (
        ("agt-1", 2048, 1500, now),
        ("agt-2", 1024, 4200, now),
        ("agt-gone", 10**9, 99_000, now - timedelta(minutes=5)),
    ):
        Agent.objects.create(
            cluster=cluster,
            agent_id=agent_id,
            host="h",
            port=1,
            last_heartbeat=seen,
            stats={"journal_unsequenced_bytes": backlog, "journal_oldest_ms": oldest},
        )
    page = signed_in(client, alice).get(cluster_url(cluster)).content.decode()
    stat = re.search(r'id="journal-backlog".*?</div>', page, re.S).group(0)
    assert "3.0\xa0KB" in html.unescape(stat) and "oldest 4 s" in stat, stat
