"""The same produce/consume path with the S3 API (moto's server over real HTTP)."""

from __future__ import annotations

import re

import pytest

from tests.agents.clients import confluent_consume, confluent_produce
from tests.fixtures_s3 import moto_s3_url  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


def test_produce_and_consume_with_an_s3_bucket(agent, cluster, moto_s3_url):  # noqa: F811
    a = agent(cluster.key, bucket_url=moto_s3_url)
    confluent_produce(
        a.bootstrap,
        "s3-topic",
        [(b"k%d" % i, b"v%d" % i, [("h", b"1")]) for i in range(50)],
        partition=0,
    )
    got = confluent_consume(a.bootstrap, "s3-topic", [0], 50)
    assert [(m.key(), m.value(), m.offset()) for m in got] == [
        (b"k%d" % i, b"v%d" % i, i) for i in range(50)
    ]
    from core.storage import open_store

    keys = [o.key for o in open_store(moto_s3_url).list(cluster.public_id + "/")]
    assert keys and all(k.startswith(cluster.public_id + "/") for k in keys), keys
    # Small segments went from the event loop (agents/s3_loop_puts.py), not a put thread.
    metrics = a.metrics()
    puts = re.search(r'^floe_segment_put_seconds_count\{outcome="ok"\} (\S+)$', metrics, re.M)
    assert puts and float(puts.group(1)) >= 1, metrics
    assert not re.search(r'^floe_io_thread_wait_seconds_count\{pool="put"\} [1-9]', metrics, re.M)
