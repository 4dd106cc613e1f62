"""Schema validation at produce: a topic with `confluent.value.schema.validation=true`
takes only values framed with the id of a schema registered under its subject; the
agent refuses the rest with INVALID_RECORD (confluent-kafka's delivery report shows it)
and writes nothing of a refused batch."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.agents.test_confluent_kafka import consume_all, create_topic, produce

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

EVENT = json.dumps({"type": "record", "name": "Event", "fields": [{"name": "n", "type": "int"}]})
OTHER = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "s", "type": "string"}]})


def test_a_validating_topic_takes_only_values_with_its_subjects_schema_ids(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "checked", 1, **{"confluent.value.schema.validation": "true"})
    create_topic(a.bootstrap, "free", 1)
    registry = SchemaRegistryClient({"url": a.registry_url})
    serialize = AvroSerializer(registry, EVENT)
    good = [
        serialize({"n": n}, SerializationContext("checked", MessageField.VALUE)) for n in range(3)
    ]
    other_id = registry.register_schema("other-value", Schema(OTHER, "AVRO"))

    def one(topic: str, value: bytes):
        (report,) = produce(a.bootstrap, [{"topic": topic, "value": value}], retries=0)
        return report[0]

    assert all(
        err is None
        for err, _, _ in produce(a.bootstrap, [{"topic": "checked", "value": v} for v in good])
    )
    unframed = one("checked", b"plain text")
    unknown = one("checked", b"\x00" + (9999).to_bytes(4, "big") + b"\x02")
    elsewhere = one("checked", b"\x00" + other_id.to_bytes(4, "big") + b"\x02")
    for err in (unframed, unknown, elsewhere):
        assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    assert one("free", b"plain text") is None  # other topics are unaffected

    # Nothing of a refused batch is readable: the three good values, and only them.
    assert [m.value() for m in consume_all(a.bootstrap, "checked", 1, 4, timeout_s=3)] == good
