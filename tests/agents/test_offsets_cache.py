"""ListOffsets latest/earliest for many partitions: one control-plane call, then the
agent answers from what it learned for a moment."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.agents.clients import confluent_produce
from tests.agents.test_confluent_kafka import create_topic

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def _list_offsets_calls(agent) -> int:
    found = re.findall(
        r'floe_control_plane_call_seconds_count\{call="list-offsets",outcome="ok"\} (\d+)',
        agent.metrics(),
    )
    return int(found[0]) if found else 0


def test_watermarks_asked_again_are_answered_by_the_agent(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "wide", partitions=100)
    confluent_produce(a.bootstrap, "wide", [(b"k", b"v", None)] * 5, partition=7)
    consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "unused"})
    try:
        before = _list_offsets_calls(a)
        for p in range(100):
            # librdkafka asks for the earliest and the latest offset (two requests); a lag
            # monitor asks again: the first answers taught the agent both watermarks.
            first = consumer.get_watermark_offsets(TopicPartition("wide", p), timeout=10)
            calls = _list_offsets_calls(a)
            again = consumer.get_watermark_offsets(TopicPartition("wide", p), timeout=10)
            assert again == first == ((0, 5) if p == 7 else (0, 0))
            assert _list_offsets_calls(a) == calls, f"partition {p} was asked again"
        assert _list_offsets_calls(a) - before <= 2 * 100  # of 400 requests
    finally:
        consumer.close()
