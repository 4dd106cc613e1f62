"""The console's topic pages: create, edit configs, delete; another organization's 404."""

from __future__ import annotations

import pytest

from metadata_store.models import Topic

pytestmark = pytest.mark.django_db


def url(tenant: dict, action: str) -> str:
    return f"/clusters/{tenant['cluster'].public_id}/{action}"


def test_it_creates_edits_and_deletes_a_topic(client, alice):
    client.force_login(alice["user"])
    created = client.post(url(alice, "topics/new"), {"name": "orders", "partitions": "3"})
    assert created.status_code == 302 and created.url == url(alice, "topics/orders/")
    assert Topic.objects.get(cluster=alice["cluster"], name="orders").partition_count == 3
    page = client.get(created.url).content.decode()  # no agent: the browser says so
    assert "Topic orders created." in page and "No live agent of this cluster is connected" in page

    config = url(alice, "topics/orders/config")
    client.post(config, {"config": "retention.ms", "value": "3600000"})
    assert Topic.objects.get(name="orders").configs == {"retention.ms": "3600000"}
    bad = client.post(config, {"config": "retention.ms", "value": "soon"}, follow=True)
    assert "must be an integer" in bad.content.decode()
    client.post(config, {"config": "retention.ms", "value": ""})
    assert Topic.objects.get(name="orders").configs == {}

    delete = url(alice, "topics/orders/delete")
    client.post(delete, {"confirm_name": "order"})
    assert Topic.objects.filter(name="orders").exists()
    assert client.post(delete, {"confirm_name": "orders"}).url == url(alice, "")
    assert not Topic.objects.filter(name="orders").exists()


def test_a_bad_topic_name_is_refused_with_a_message(client, alice):
    client.force_login(alice["user"])
    page = client.post(url(alice, "topics/new"), {"name": "no spaces"}, follow=True)
    assert "illegal" in page.content.decode()
    assert not Topic.objects.exists()


def test_another_organizations_topics_are_404(client, alice, bob):
    client.force_login(bob["user"])
    assert client.post(url(alice, "topics/new"), {"name": "x"}).status_code == 404
    client.force_login(alice["user"])
    client.post(url(alice, "topics/new"), {"name": "mine"})
    client.force_login(bob["user"])
    for action in ("topics/mine/", "topics/mine/config", "topics/mine/delete"):
        method = client.get if action.endswith("/") else client.post
        assert method(url(alice, action)).status_code == 404
    assert Topic.objects.filter(name="mine").exists()
