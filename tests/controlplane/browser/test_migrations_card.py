"""The cluster page's Migrations card in a real browser, wide and narrow (issue 30)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from metadata_store.mirroring import MirroredBatch, mirrored_file_commit, topic_mirroring_set
from metadata_store.topics import topic_create
from tests.controlplane.browser.conftest import log_in
from tests.factories import make_cluster, make_org
from virtualclusters.mirror.models import MigrationTopic
from virtualclusters.mirror.services import migration_create, migration_cutover, migration_lease

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_migrations_card_shows_topics_and_groups(page, screenshots):
    user, org = make_org("Movers")
    cluster, _ = make_cluster("orders", org=org)
    migration = migration_create(
        cluster=cluster, source_bootstrap="kafka-1.internal:9092", topics="orders|payments|clicks",
        groups="billing-.*",
    )  # fmt: skip
    _, lease = migration_lease(cluster=cluster, agent_id="agt-jobs-1", lease_s=60)
    migration.lease_agent = "agt-jobs-1"
    migration.groups = {"billing-1": {"state": "copied", "partitions": []}}
    migration.save(update_fields=["lease_agent", "groups"])
    for name, partitions in (("orders", 1), ("payments", 3), ("clicks", 12)):
        topic = topic_create(cluster=cluster, name=name, num_partitions=partitions)
        MigrationTopic.objects.create(
            migration=migration, name=name, topic=topic,
            partitions=[{"partition": p, "source_end_offset": 5000, "bytes_copied": 3 << 20}
                        for p in range(partitions)],
        )  # fmt: skip
        topic_mirroring_set(topic=topic, migration_id=migration.public_id)
        mirrored_file_commit(
            cluster_id=cluster.pk,
            migration_id=migration.public_id,
            lease=lease.token,
            file_key=f"{cluster.public_id}/mirror/{name}.seg",
            size=100,
            batches=[MirroredBatch(topic.id, 0, 0, 4199, 4200, 0, 100)],
        )
    migration_cutover(migration=migration, topics=["orders"])
    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/")
    card = page.locator("#migrations")
    expect(card).to_contain_text(migration.public_id)
    expect(card).to_contain_text("Cut over")
    expect(card.locator("tr", has_text="payments")).to_contain_text("10,800")
    expect(card).to_contain_text("billing-1")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        card.screenshot(path=screenshots / f"migrations-card-{width}.png")
