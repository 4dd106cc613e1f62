"""The message browser decodes keys and values framed with a schema id of the cluster's
registry: confluent-kafka's Avro, JSON Schema and Protobuf serializers write through a
real agent's registry, and the REST API and the topic page show the values as JSON with
their subject, version and id; a bad frame, an unknown id and a payload its schema does
not read say why and fall back to hex. Texts are read once per page, whatever its size."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from django.db import connection
from django.test.utils import CaptureQueriesContext
from playwright.sync_api import expect
from rest_framework.test import APIClient

from tests.agents.conftest import agent, bucket_url  # noqa: F401 - fixtures
from tests.agents.test_schema_linking import proto_classes
from tests.controlplane.browser.conftest import log_in
from tests.controlplane.browser.test_console_pages import shots_wide_and_narrow
from tests.factories import make_api_key, make_cluster, make_org
from virtualclusters.record_browser import records_browse

pytestmark = [pytest.mark.browser, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"},
                    {"name": "raw", "type": "bytes"}]}  # fmt: skip
PAYMENT = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment",
           "type": "object", "properties": {"cents": {"type": "integer"}}}  # fmt: skip


def _produce(running) -> None:
    """Per topic: values of each format, then a bad frame, an unknown id, a payload
    the schema does not read (offsets 0–2 are good, 3–5 are not)."""
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{running.registry_port}"})
    order_class, money_class = proto_classes()
    avro = AvroSerializer(registry, json.dumps(ORDER))
    payments = JSONSerializer(json.dumps(PAYMENT), registry)
    protobuf = ProtobufSerializer(order_class, registry, {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 5})
    for n in range(3):
        producer.produce("orders", key=f"o-{n}".encode(), value=avro(
            {"id": n, "note": f"ü{n}", "raw": b"\x00\xff"},
            SerializationContext("orders", MessageField.VALUE)))  # fmt: skip
        producer.produce("payments", value=payments(
            {"cents": 100 + n}, SerializationContext("payments", MessageField.VALUE)))  # fmt: skip
        message = order_class(id=n, price=money_class(cents=250 + n, currency="EUR"))
        producer.produce("proto-orders", value=protobuf(
            message, SerializationContext("proto-orders", MessageField.VALUE)))  # fmt: skip
    producer.produce("orders", value=b"\x00\x00\x01")  # bad frame: 3 bytes
    producer.produce("orders", value=b"\x00\x00\x00\x03\xe7{}")  # id 999: unknown
    producer.produce("orders", value=b"\x00\x00\x00\x00\x01\x80")  # id 1: not an Order
    assert producer.flush(30) == 0


def test_framed_values_decode_through_the_registry_in_the_api_and_on_the_page(
    page,
    live_server,
    agent,  # noqa: F811
    screenshots,
):
    user, org = make_org("Shop")
    other_user, other_org = make_org("Other shop")
    cluster, key = make_cluster("shop", org=org, auto_create_topics=True)
    running = agent(key)
    _produce(running)

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    base = f"/api/v1/clusters/{cluster.public_id}/topics"
    orders = api.get(f"{base}/orders/records/", {"offset": 0, "limit": 10})
    assert orders.status_code == 200, orders.content
    records = orders.json()["records"]
    assert [r["offset"] for r in records] == [0, 1, 2, 3, 4, 5]
    first = records[0]["value_decoded"]
    assert first == {"schema_id": 1, "subject": "orders-value", "version": 1, "error": None,
                     "schema_type": "AVRO", "json": {"id": 0, "note": "ü0", "raw": "\u0000ÿ"}}  # fmt: skip
    assert records[0]["key_decoded"] is None  # a plain string key
    assert records[3]["value_decoded"]["schema_id"] is None
    assert records[3]["value_decoded"]["error"].startswith("bad frame: 3 bytes")
    assert records[4]["value_decoded"] == {
        "schema_id": 999, "subject": None, "version": None, "schema_type": None, "json": None,
        "error": "unknown schema id 999 in this cluster's registry"}  # fmt: skip
    assert records[5]["value_decoded"]["error"].startswith("does not read as schema id 1")
    assert records[5]["value_decoded"]["subject"] == "orders-value"

    payments = api.get(f"{base}/payments/records/", {"offset": 0}).json()["records"]
    decoded = payments[2]["value_decoded"]
    assert (decoded["subject"], decoded["schema_type"], decoded["json"]) == (
        "payments-value", "JSON", {"cents": 102})  # fmt: skip
    protos = api.get(f"{base}/proto-orders/records/", {"offset": 0}).json()["records"]
    decoded = protos[1]["value_decoded"]
    assert (decoded["subject"], decoded["version"], decoded["schema_type"]) == (
        "proto-orders-value", 1, "PROTOBUF")  # fmt: skip
    assert decoded["json"] == {"id": "1", "price": {"cents": "251", "currency": "EUR"}}

    # Another organization's key reads nothing of this cluster.
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(other_org)}")
    assert other.get(f"{base}/orders/records/").status_code == 404

    # The registry is read once per page: the same queries for 1 record and for 6.
    counts = []
    for limit in (1, 6):
        with CaptureQueriesContext(connection) as queries:
            page_read = records_browse(cluster, topic="orders", partition=0, offset=0, limit=limit)
        assert len(page_read["records"]) == limit
        counts.append(len(queries))
    assert counts[0] == counts[1], counts

    log_in(page, user.email)
    page.goto(f"/clusters/{cluster.public_id}/topics/orders/?offset=0")
    first_record = page.locator('li.record[data-offset="0"]')
    expect(first_record.locator(".record-schema")).to_contain_text("orders-value v1 · id 1")
    expect(first_record.locator(".record-value")).to_contain_text('"note": "ü0"')
    expect(first_record.locator(".record-key")).to_have_text("o-0")
    unknown = page.locator('li.record[data-offset="4"]')
    expect(unknown.locator(".record-schema-error")).to_contain_text("unknown schema id 999")
    expect(unknown.locator(".record-value")).to_have_text("00 00 00 03 e7 7b 7d")
    shots_wide_and_narrow(page, screenshots, "topic-decoded-avro")
    page.goto(f"/clusters/{cluster.public_id}/topics/proto-orders/?offset=0")
    expect(page.locator('li.record[data-offset="2"] .record-schema')).to_contain_text(
        "PROTOBUF proto-orders-value v1"
    )
    expect(page.locator('li.record[data-offset="2"] .record-value')).to_contain_text(
        '"currency": "EUR"'
    )
    page.goto(f"/clusters/{cluster.public_id}/topics/orders/?offset=0&format=hex")
    expect(page.locator('li.record[data-offset="0"] .record-schema')).to_have_count(0)
