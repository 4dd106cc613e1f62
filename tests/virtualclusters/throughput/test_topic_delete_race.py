"""A topic's deletion and an agent heartbeat's consumed totals at the same moment: the
heartbeat's row pointing at the topic either lands before the deletion collects what it
deletes with the topic, or not at all — the deletion never fails its foreign key check at
commit (librdkafka's 0181 deleted a topic being share-consumed and got a 500)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from django.db.models.signals import post_delete

from metadata_store.models import Partition
from metadata_store.topics import topic_create, topic_delete
from tests.factories import make_cluster
from virtualclusters.throughput.models import TopicConsumed
from virtualclusters.throughput.services import consumption_add

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_heartbeat_between_a_topic_s_collect_and_its_delete_does_not_break_it():
    cluster, _ = make_cluster()
    topic = topic_create(cluster=cluster, name="orders", num_partitions=1)
    heartbeat_done = threading.Event()

    def heartbeat() -> None:
        try:
            with transaction.atomic():  # as the agent API's heartbeat view
                consumption_add(cluster=cluster, before={}, after={str(topic.pk): [100, 1]})
        finally:
            connection.close()
            heartbeat_done.set()

    thread = threading.Thread(target=heartbeat, daemon=True)

    def in_the_middle(sender, **kwargs) -> None:
        # The partitions are deleted: the rows pointing at the topic are collected, the
        # topic's own row not deleted yet. The heartbeat runs now (it waits for the
        # deletion once the topic's row is locked: 3 s, then the deletion goes on).
        if not thread.is_alive() and not heartbeat_done.is_set():
            thread.start()
            heartbeat_done.wait(3)

    post_delete.connect(in_the_middle, sender=Partition, weak=False)
    try:
        topic_delete(topic=topic)  # the old code: IntegrityError at its commit
    finally:
        post_delete.disconnect(in_the_middle, sender=Partition)
        thread.join(timeout=15)
    assert heartbeat_done.is_set()
    assert not TopicConsumed.objects.filter(topic_id=topic.pk).exists()
