"""A cluster's migration pages (issue 38): the form creates a migration through the same
service as the REST API and shows its errors next to their fields; the watch page shows
partitions, groups and what the copier waits for; cutover and stop each go through a page
that says what happens; every action is in the audit log; a read-only member watches but
cannot act; another organization's migration is a 404."""

from __future__ import annotations

import pytest
from django.db import connection
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext

from metadata_store.mirroring import MirroredBatch, mirrored_file_commit, topic_mirroring_set
from metadata_store.models import Topic
from metadata_store.topics import topic_create
from team import members as team
from team.models import AuditEvent
from tenancy.models import Membership
from tests import factories
from virtualclusters.mirror.models import Migration, MigrationTopic
from virtualclusters.mirror.selectors import migration_shown
from virtualclusters.mirror.services import migration_create, migration_lease

pytestmark = pytest.mark.django_db

# The watch page (reloaded every 3 s): the session, the person and their organization,
# the cluster, the migration, its lease, its topics, their partitions — 10 alone; a few
# more in the whole suite's order (14 seen once in CI, not reproduced alone), so the bound
# leaves room for those and the test's point is that the count does not grow with size.
QUERIES = 16

FORM = {
    "source_bootstrap": "kafka-1.internal:9092",
    "source_security__protocol": "SASL_SSL",
    "source_security__sasl_mechanism": "SCRAM-SHA-512",
    "source_security__username": "mover",
    "source_security__password": "s3cret-pw",
    "source_security__ca": "",
    "topics": "orders|payments",
    "groups": "billing-.*",
}


def _urls(cluster, migration=None) -> dict[str, str]:
    base = f"/clusters/{cluster.public_id}/migrations/"
    urls = {"list": base, "new": base + "new"}
    if migration is not None:
        mid = migration.public_id
        urls |= {
            "page": f"{base}{mid}/",
            "cutover": f"{base}{mid}/cutover",
            "stop": f"{base}{mid}/stop",
        }
    return urls


def _mirrored(cluster, *, topics=("orders", "payments")) -> Migration:
    """A running migration with two mirrored topics of 2 partitions, part copied, as a
    copier reports them; a group waiting and one copied."""
    migration = migration_create(
        cluster=cluster, source_bootstrap="kafka-1.internal:9092", topics="|".join(topics),
        groups="billing-.*",
    )  # fmt: skip
    _, lease = migration_lease(cluster=cluster, agent_id="agt-jobs-1", lease_s=60)
    migration.refresh_from_db()
    migration.waiting_for = "the source: KafkaConnectionError: connect to 10.0.0.9:9092"
    migration.groups = {
        "billing-1": {
            "state": "copied",
            "error": "",
            "partitions": [
                {"topic": "orders", "partition": 0, "source_offset": 900, "copied_offset": 900}
            ],
        },
        "billing-2": {"state": "waiting for the copy to reach its offsets", "partitions": []},
    }
    migration.save(update_fields=["waiting_for", "groups"])
    for name in topics:
        topic = topic_create(cluster=cluster, name=name, num_partitions=2)
        MigrationTopic.objects.create(
            migration=migration, name=name, topic=topic,
            partitions=[
                {"partition": 0, "source_log_start": 0, "source_end_offset": 1500,
                 "bytes_copied": 4096, "error": ""},
                {"partition": 1, "source_log_start": 100, "source_end_offset": 700,
                 "bytes_copied": 0, "error": "NOT_LEADER_OR_FOLLOWER from broker 2"},
            ],
        )  # fmt: skip
        topic_mirroring_set(topic=topic, migration_id=migration.public_id)
        mirrored_file_commit(
            cluster_id=cluster.pk, migration_id=migration.public_id, lease=lease.token,
            file_key=f"{cluster.public_id}/mirror/{name}.seg", size=100,
            batches=[MirroredBatch(topic.id, 0, 0, 1199, 1200, 0, 100)],
        )  # fmt: skip
    return migration


def _member(org, owner):
    invitation, _, _ = team.invitation_create(
        organization=org, email="viewer@example.com", role=Membership.Role.MEMBER,
        invited_by=owner, link_base="http://x",
    )  # fmt: skip
    return team.invitation_account_create(invitation=invitation, password=factories.PASSWORD)


def test_the_form_creates_a_migration_and_shows_errors_next_to_their_fields(client, alice):
    client.force_login(alice["user"])
    urls = _urls(alice["cluster"])
    page = client.get(urls["new"]).content.decode()
    for label in ("Source bootstrap servers", "Security protocol", "SASL mechanism",
                  "SASL username", "SASL password", "CA certificates (PEM)", "Topics (regex)",
                  "Consumer groups (regex)", "Start from now"):  # fmt: skip
        assert label in page

    bad = client.post(urls["new"], {**FORM, "topics": "orders(", "source_bootstrap": ""})
    assert bad.status_code == 400
    form = bad.context["form"]
    assert form.errors["source_bootstrap"] == ["This field is required."]
    bad = client.post(urls["new"], {**FORM, "topics": "orders("})
    assert bad.status_code == 400
    assert bad.context["form"].errors["topics"][0].startswith("not a regular expression")
    assert 'class="field has-error"' in bad.content.decode()
    assert not Migration.objects.exists()

    made = client.post(urls["new"], {**FORM, "start_from_now": "on"})
    migration = Migration.objects.get()
    assert (
        made.status_code == 302 and made["Location"] == _urls(alice["cluster"], migration)["page"]
    )
    assert (migration.source_bootstrap, migration.topics_regex, migration.groups_regex) == (
        "kafka-1.internal:9092", "orders|payments", "billing-.*"
    )  # fmt: skip
    assert migration.start_from_now
    assert migration.source_security == {
        "protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": "mover"
    }  # fmt: skip
    assert migration.source_password_sealed and "s3cret" not in migration.source_password_sealed

    # A regex that takes a topic a running migration mirrors: the conflict, by the field.
    MigrationTopic.objects.create(migration=migration, name="orders")
    again = client.post(urls["new"], {**FORM, "topics": "ord.*"})
    assert again.status_code == 400
    assert again.context["form"].errors["topics"] == [
        "topic 'orders' is mirrored by a running migration"
    ]
    page = client.get(_urls(alice["cluster"], migration)["page"]).content.decode()
    assert "s3cret" not in page and "SCRAM-SHA-512" in page and "mover" in page


def test_the_page_shows_partitions_groups_and_what_the_copier_waits_for(client, alice):
    migration = _mirrored(alice["cluster"])
    client.force_login(alice["user"])
    response = client.get(_urls(alice["cluster"], migration)["page"])
    page = response.content.decode()
    assert response.status_code == 200
    assert 'data-refresh="3000"' in page  # running: the page reloads its state
    assert "agt-jobs-1" in page and "KafkaConnectionError" in page
    row = page[page.index('data-partition="orders-0"') :].split("</tr>")[0]
    cells = [c.split(">", 1)[1].split("<")[0] for c in row.split("<td")[1:]]
    assert cells[:8] == ["orders", "0", "0", "1500", "0", "1200", "300", "4.0\xa0KB"]
    row = page[page.index('data-partition="payments-1"') :].split("</tr>")[0]
    assert ">700<" in row
    error = page[page.index('data-partition-error="payments-1"') :].split("</tr>")[0]
    assert "payments/1: NOT_LEADER_OR_FOLLOWER from broker 2" in error
    assert 'data-partition-error="orders-0"' not in page
    topic = page[page.index('data-topic="orders"') :].split("</tr>")[0]
    # Copied of the source's records: 1,500 + 600, 1,200 of them held (partition 1 none).
    assert 'max="2100" value="1200"' in topic and ">1,000<" in topic
    assert 'name="topics" value="orders"' in topic  # a box to choose it for the cutover
    group = page[page.index('data-group="billing-1"') :].split("</tr>")[0]
    assert "copied" in group and ">900<" in group
    assert "waiting for the copy to reach its offsets" in page
    assert "Stop migration" in page


def test_a_cutover_and_a_stop_each_confirm_first_and_are_audited(client, alice):
    migration = _mirrored(alice["cluster"])
    urls = _urls(alice["cluster"], migration)
    client.force_login(alice["user"])

    confirm = client.get(urls["cutover"], {"topics": ["payments"]})
    page = confirm.content.decode()
    assert confirm.status_code == 200
    assert "Cut over 1 topic?" in page and "becomes writable" in page
    assert "cannot be undone" in page and "not copied yet" in page  # 900 behind
    assert 'name="topics" value="payments"' in page and 'value="orders"' not in page
    assert Topic.objects.get(name="payments").mirrored_by == migration.public_id  # nothing yet

    done = client.post(urls["cutover"], {"topics": ["payments"]})
    assert done.status_code == 302 and done["Location"] == urls["page"]
    assert Topic.objects.get(name="payments").mirrored_by == ""
    assert MigrationTopic.objects.get(name="payments").state == "cut_over"
    assert Topic.objects.get(name="orders").mirrored_by == migration.public_id
    # Cut over already: refused with a message, back to the page.
    again = client.get(urls["cutover"], {"topics": ["payments"]}, follow=True)
    assert "Only topics this migration still mirrors" in again.content.decode()
    none = client.post(urls["cutover"], {}, follow=True)
    assert "Choose the topics to cut over." in none.content.decode()

    stop = client.get(urls["stop"]).content.decode()
    assert "Stop migration" in stop and "cannot be undone" in stop
    assert 'data-topic="orders"' in stop and 'data-topic="payments"' not in stop
    assert Migration.objects.get().state == "running"
    assert client.post(urls["stop"]).status_code == 302
    assert Migration.objects.get().state == "stopped"
    assert Topic.objects.get(name="orders").mirrored_by == ""
    page = client.get(urls["page"]).content.decode()
    assert "data-refresh" not in page and "Stop migration" not in page
    assert client.post(urls["stop"]).status_code == 302  # stopping again changes nothing
    again = client.get(urls["stop"], follow=True).content.decode()
    assert "is stopped already" in again and "cannot be undone" not in again

    events = [
        (e.action, e.target_type, e.target_id, e.target_name, e.actor_label)
        for e in AuditEvent.objects.for_org(alice["org"]).filter(target_type="migration")
        .order_by("id")
    ]  # fmt: skip
    mid, email = migration.public_id, "system"  # (made by the service, outside a request)
    assert events == [
        ("created", "migration", mid, "orders|payments from kafka-1.internal:9092", email),
        ("cut over", "migration", mid, "payments", alice["user"].email),
        ("stopped", "migration", mid, "orders", alice["user"].email),
    ]
    audit = client.get("/audit?target_type=migration&action=cut over").content.decode()
    assert 'data-event="migration-cut over"' in audit and "payments" in audit


def test_the_console_form_is_audited_with_its_user(client, alice):
    client.force_login(alice["user"])
    client.post(_urls(alice["cluster"])["new"], FORM)
    event = AuditEvent.objects.get(target_type="migration")
    assert (event.action, event.actor_label) == ("created", alice["user"].email)


def test_a_read_only_member_watches_but_cannot_act(client, alice):
    migration = _mirrored(alice["cluster"])
    urls = _urls(alice["cluster"], migration)
    client.force_login(_member(alice["org"], alice["user"]))
    page = client.get(urls["page"]).content.decode()
    assert "agt-jobs-1" in page
    assert 'name="topics"' not in page and "Stop migration" not in page
    assert "New migration" not in client.get(urls["list"]).content.decode()
    confirm = client.get(urls["cutover"], {"topics": ["orders"]}).content.decode()
    assert "read-only" in confirm and 'id="confirm-form"' not in confirm
    for url, body in ((urls["new"], FORM), (urls["cutover"], {"topics": ["orders"]}),
                      (urls["stop"], {})):  # fmt: skip
        refused = client.post(url, body)
        assert refused.status_code == 403, url
        assert "read-only" in refused.content.decode()
    assert Migration.objects.get().state == "running"
    assert Topic.objects.get(name="orders").mirrored_by == migration.public_id
    assert Migration.objects.count() == 1


def test_another_organizations_migration_is_a_404(client, alice, bob):
    migration = _mirrored(alice["cluster"])
    alices = _urls(alice["cluster"], migration)
    client.force_login(bob["user"])
    for url in alices.values():
        assert client.get(url).status_code == 404, url
    assert client.post(alices["new"], FORM).status_code == 404
    assert client.post(alices["cutover"], {"topics": ["orders"]}).status_code == 404
    assert client.post(alices["stop"]).status_code == 404
    # Alice's migration under Bob's own cluster: not found either.
    bobs = _urls(bob["cluster"], migration)
    for name in ("page", "cutover", "stop"):
        assert client.get(bobs[name], {"topics": ["orders"]}).status_code == 404, name
    assert client.post(bobs["stop"]).status_code == 404
    assert Migration.objects.get().state == "running"
    assert Topic.objects.get(name="orders").mirrored_by == migration.public_id


def test_the_rest_apis_actions_are_audited_with_its_key(api, alice):
    admin = api(alice["admin"])
    url = f"/api/v1/clusters/{alice['cluster'].public_id}/migrations/"
    made = admin.post(url, {"source_bootstrap": "127.0.0.1:9092", "topics": "orders"})
    assert made.status_code == 201, made.content
    migration = Migration.objects.get(public_id=made.json()["id"])
    orders = topic_create(cluster=alice["cluster"], name="orders", num_partitions=1)
    MigrationTopic.objects.create(migration=migration, name="orders", topic=orders)
    topic_mirroring_set(topic=orders, migration_id=migration.public_id)
    assert (
        admin.post(f"{url}{migration.public_id}/cutover/", {"topics": ["orders"]}).status_code
        == 200
    )
    assert admin.delete(f"{url}{migration.public_id}/").status_code == 204
    assert admin.delete(f"{url}{migration.public_id}/").status_code == 204  # no second line
    events = [
        (e.action, e.target_name, e.actor_label.startswith("API key "))
        for e in AuditEvent.objects.for_org(alice["org"]).filter(target_type="migration")
        .order_by("id")
    ]  # fmt: skip
    assert events == [
        ("created", "orders from 127.0.0.1:9092", True),
        ("cut over", "orders", True),
        ("stopped", "orders", True),
    ]


def test_the_page_shows_copied_configs_and_schema_linking_when_the_state_has_them(
    client, rf, alice
):
    """What other parts of issue 38 add to a migration's state (each topic's copied
    configs and when retention applies; the schema link's progress) shows when present."""
    migration = _mirrored(alice["cluster"])
    client.force_login(alice["user"])
    assert (
        'id="migration-schemas"'
        not in client.get(_urls(alice["cluster"], migration)["page"]).content.decode()
    )
    shown = migration_shown(migration)
    orders = shown["topics"][0]
    orders["retention_applies"] = "after cutover"
    orders["configs"] = {
        "retention.ms": {"value": "604800000", "origin": "kafka_default"},
        "cleanup.policy": {"value": "compact", "origin": "topic"},
        "max.message.bytes": {"value": "99999999999", "origin": "topic", "error": "too big"},
    }
    shown["subjects_regex"] = "orders-.*"
    shown["source_schema_registry"] = {"url": "http://registry.internal:8081"}
    shown["schemas"] = {
        "state": "linking", "subjects_copied": 20, "versions_copied": 31,
        "last_sync": "2026-11-28T22:00:00Z", "error": "", "subject_errors": {"bad": "no text"},
    }  # fmt: skip
    request = rf.get("/")
    request.user = alice["user"]
    context = {"cluster": alice["cluster"], "migration": shown, "may_act": True}
    page = render_to_string("virtualclusters/migration.html", context, request=request)
    topic = page[page.index('data-topic="orders"') :].split("</tr>")[0]
    assert "retention applies after cutover" in topic and "3 configs copied" in topic
    assert '<code>retention.ms=604800000</code> <span class="muted">Kafka\'s default' in topic
    assert "<code>cleanup.policy=compact</code>" in topic and "too big" in topic
    schemas = page[page.index('id="migration-schemas"') :].split("</section>")[0]
    for text in ("orders-.*", "http://registry.internal:8081", "<dd>20</dd>", "<dd>31</dd>",
                 "linking", "no text"):  # fmt: skip
        assert text in schemas, text


def test_the_page_reloaded_every_few_seconds_costs_the_same_few_queries_at_any_size(
    client, alice, django_assert_max_num_queries
):
    migration = _mirrored(alice["cluster"], topics=("orders",))
    client.force_login(alice["user"])
    url = _urls(alice["cluster"], migration)["page"]
    # (The first request of a process fills caches of its own, e.g. content types, that
    # a reload every 3 s never pays again.)
    assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as small:
        assert client.get(url).status_code == 200
    for n in range(12):  # many more topics, partitions and groups: no more queries
        topic = topic_create(cluster=alice["cluster"], name=f"t{n}", num_partitions=4)
        MigrationTopic.objects.create(migration=migration, name=f"t{n}", topic=topic)
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert client.get(url).status_code == 200
    assert len(small.captured_queries) <= QUERIES, [q["sql"] for q in small.captured_queries]
