"""A plan's cap on monthly writes: produce is refused with THROTTLING_QUOTA_EXCEEDED once
the metered bytes reach it (confluent-kafka hands the error to the application), and
accepted again after an upgrade."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer

from billing.meters import meters_run
from billing.selectors import catalog_plan
from billing.services import subscription_change

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def produce_one(bootstrap: str, value: bytes) -> KafkaError | None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 10_000}
    )
    outcome = []
    producer.produce("capped", value=value, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(15)
    assert len(outcome) == 1
    return outcome[0]


def wait_for(predicate, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError("condition not reached")


def test_the_cap_refuses_produce_until_the_organization_upgrades(agent, cluster, settings):
    settings.FLOE_BILLING_METER_LAG_S = 0
    org = cluster.cluster.organization  # on no subscription: the free tier
    free = catalog_plan("free")
    free.caps = {"written_bytes": 2000}  # plans are data: a free tier of 2000 bytes
    free.save()
    a = agent(cluster.key)
    assert produce_one(a.bootstrap, b"x" * 3000) is None  # under the cap when it was sent
    meters_run()  # now 3000+ bytes written: over the cap

    def refused():
        err = produce_one(a.bootstrap, b"y")
        return err if err is not None else None

    err = wait_for(refused)
    assert err.code() == KafkaError.THROTTLING_QUOTA_EXCEEDED

    subscription_change(organization=org, plan=catalog_plan("pay-as-you-go"))
    wait_for(lambda: produce_one(a.bootstrap, b"z") is None)
