"""The hosted Prometheus endpoint against a live agent: a group that read part of a topic
through librdkafka and committed there has, in the scrape, exactly the lag a
confluent-kafka client computes (high watermark − committed offset)."""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import factories
from tests.agents.groups.members import wait_until
from tests.agents.groups.test_admin import produce
from tests.agents.groups.test_clients import create_topic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(60)]


def read_and_commit(bootstrap: str, group: str, topic: str, upto: dict[int, int]) -> None:
    """Read each partition up to its offset in `upto` and commit there (a consumer
    that stopped part way)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in upto])
        seen = {p: 0 for p in upto}
        deadline = time.monotonic() + 20
        while any(seen[p] < n for p, n in upto.items()) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen[message.partition()] = max(seen[message.partition()], message.offset() + 1)
        assert all(seen[p] >= n for p, n in upto.items()), seen
        consumer.commit(
            offsets=[TopicPartition(topic, p, n) for p, n in upto.items()], asynchronous=False
        )
    finally:
        consumer.close()


def client_side_lag(bootstrap: str, group: str, topic: str, partitions: int) -> dict[str, int]:
    """What librdkafka sees: committed offsets and high watermarks, per partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
        return {
            str(tp.partition): consumer.get_watermark_offsets(tp, timeout=10)[1] - tp.offset
            for tp in committed
        }
    finally:
        consumer.close()


def test_a_scrape_shows_the_lag_a_kafka_client_computes(agent, cluster, api):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "payments", 2)
    produce(a.bootstrap, "payments", 30, 2)  # 15 records per partition
    read_and_commit(a.bootstrap, "ledger", "payments", {0: 10, 1: 4})
    expected = client_side_lag(a.bootstrap, "ledger", "payments", 2)
    assert expected == {"0": 5, "1": 11}

    scraper = api(factories.make_api_key(cluster.cluster.organization, role="member"))
    url = f"/api/v1/clusters/{cluster.public_id}/metrics"

    def lag() -> dict[str, float]:
        text = scraper.get(url, HTTP_ACCEPT="text/plain").content.decode()
        return {
            s.labels["partition"]: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "floe_consumer_group_lag"
            and s.labels["group"] == "ledger"
            and s.labels["topic"] == "payments"
        }

    wait_until(lambda: lag() == expected, 10, f"the scrape shows the lag {expected}")
    text = scraper.get(url).content.decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    [live] = families["floe_agents_live"].samples
    assert live.value == 1
    records_in = {s.labels["topic"]: s.value for s in families["floe_topic_records_in"].samples}
    assert records_in["payments"] == 30
