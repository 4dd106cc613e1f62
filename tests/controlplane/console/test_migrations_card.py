"""The cluster page's migrations card (issue 30): each migration's topics with their
state, records behind and bytes copied; never the source password; absent without one;
another organization's cluster page stays a 404."""

from __future__ import annotations

import pytest

from metadata_store.mirroring import MirroredBatch, mirrored_file_commit, topic_mirroring_set
from metadata_store.models import Partition
from metadata_store.topics import topic_create
from virtualclusters.mirror.models import MigrationTopic
from virtualclusters.mirror.services import migration_create, migration_cutover, migration_lease

pytestmark = pytest.mark.django_db


def test_the_cluster_page_shows_its_migrations(client, alice, bob):
    client.force_login(alice["user"])
    page_url = f"/clusters/{alice['cluster'].public_id}/"
    assert 'id="migrations"' not in client.get(page_url).content.decode()

    migration = migration_create(
        cluster=alice["cluster"],
        source_bootstrap="127.0.0.1:29092",
        topics="orders|payments",
        groups="billing-.*",
        source_security={
            "protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "username": "mover",
            "password": "s3cret-pw",
        },  # fmt: skip
    )
    for name in ("orders", "payments"):
        topic = topic_create(cluster=alice["cluster"], name=name, num_partitions=2)
        MigrationTopic.objects.create(
            migration=migration,
            name=name,
            topic=topic,
            partitions=[
                {"partition": 0, "source_end_offset": 1500, "bytes_copied": 2048},
                {"partition": 1, "source_end_offset": 700, "bytes_copied": 1024},
            ],
        )
        topic_mirroring_set(topic=topic, migration_id=migration.public_id)
    orders_id = Partition.objects.get(topic__name="orders", index=0).topic_id
    _, lease = migration_lease(cluster=alice["cluster"], agent_id="agt-jobs", lease_s=60)
    mirrored_file_commit(
        cluster_id=alice["cluster"].pk,
        migration_id=migration.public_id,
        lease=lease.token,
        file_key=f"{alice['cluster'].public_id}/mirror/f1.seg",
        size=100,
        batches=[MirroredBatch(orders_id, 0, 0, 1199, 1200, 0, 100)],
    )
    migration_cutover(migration=migration, topics=["payments"])
    migration.groups = {"billing-1": {"state": "copied", "partitions": []}}
    migration.save(update_fields=["groups"])

    page = client.get(page_url).content.decode()
    card = page[page.index('id="migrations"') : page.index('id="agent-keys"')]
    assert migration.public_id in card and "127.0.0.1:29092" in card and "Running" in card
    orders = card[card.index("orders") : card.index("payments")]
    assert "Mirroring" in orders and "1,000" in orders and "3.0\xa0KB" in orders
    assert "Cut over" in card[card.index("payments") :]
    assert "billing-1" in card and "copied" in card
    assert "s3cret" not in page
    assert "retention applies after cutover" in card

    client.force_login(bob["user"])
    assert client.get(page_url).status_code == 404
