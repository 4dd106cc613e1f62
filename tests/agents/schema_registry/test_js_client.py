"""A second, independent client of the agent's registry: `@kafkajs/confluent-schema-registry`
with kafkajs, on the subjects confluent-kafka's serializers registered — it registers the
same schemas (Avro and JSON Schema as JSON, Protobuf as `.proto` text where confluent-kafka
sent a descriptor) and gets the same ids, decodes what confluent-kafka produced through
the Kafka port, and what it encodes confluent-kafka's deserializers read back. (Its
Protobuf encoder writes no message indexes, which Confluent's framing has: Protobuf is
checked one way.)"""

from __future__ import annotations

import json
import os

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.agents.clients import kafkajs
from tests.agents.schema_registry.test_clients import ORDER, ORDER_JSON, order_message_class
from tests.agents.test_confluent_kafka import consume_all, produce

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

ORDER_PROTO = (
    'syntax = "proto3";\npackage floe.test;\nmessage Order { int64 id = 1; string item = 2; }\n'
)

SCRIPT = """
const { Kafka, logLevel } = require('kafkajs');
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
(async () => {
  // Decoding first, with a client that has registered nothing: every schema is fetched
  // by id, the Protobuf one as the .proto text printed from the descriptor sent.
  const reader = new SchemaRegistry({ host: process.env.REGISTRY });
  const kafka = new Kafka({ clientId: 'js-registry', brokers: [process.env.BOOTSTRAP],
                            logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: 'js-registry-' + Date.now() });
  const decoded = { 'js-avro': [], 'js-json': [], 'js-proto': [] };
  const want = Number(process.env.COUNT) * 3;
  let got = 0;
  await consumer.connect();
  for (const topic of Object.keys(decoded)) await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out with ' + got)), 45000);
    consumer.run({ eachMessage: async ({ topic, message }) => {
      const value = await reader.decode(message.value);
      decoded[topic].push(topic === 'js-proto' ? value.toJSON() : value);
      if (++got === want) { clearTimeout(timer); resolve(); }
    } });
  });
  await consumer.disconnect();
  const registry = new SchemaRegistry({ host: process.env.REGISTRY });
  const ids = {
    avro: (await registry.register({ type: SchemaType.AVRO, schema: process.env.AVRO },
                                   { subject: 'js-avro-value' })).id,
    json: (await registry.register({ type: SchemaType.JSON, schema: process.env.JSON_SCHEMA },
                                   { subject: 'js-json-value' })).id,
    proto: (await registry.register({ type: SchemaType.PROTOBUF, schema: process.env.PROTO },
                                    { subject: 'js-proto-value' })).id,
  };
  const producer = kafka.producer(); await producer.connect();
  for (const [topic, id] of [['js-avro', ids.avro], ['js-json', ids.json]]) {
    const value = await registry.encode(id, { id: 1000, item: 'from-kafkajs' });
    await producer.send({ topic, acks: -1, messages: [{ value }] });
  }
  await producer.disconnect();
  console.log(JSON.stringify({ ids, decoded }));
})().catch(e => { console.error(e); process.exit(1); });
"""


def context(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def test_kafkajs_registry_client_shares_ids_and_records_with_confluent_kafka(agent, cluster):
    a = agent(cluster.key)
    client = SchemaRegistryClient({"url": a.registry_url})
    records = [{"id": n, "item": f"item-{n}"} for n in range(1, 6)]
    order = order_message_class()
    serializers = {
        "js-avro": AvroSerializer(client, json.dumps(ORDER)),
        "js-json": JSONSerializer(json.dumps(ORDER_JSON), client),
        "js-proto": ProtobufSerializer(order, client, {"use.deprecated.format": False}),
    }
    for topic, serialize in serializers.items():
        rows = [order(**r) for r in records] if topic == "js-proto" else records
        values = [serialize(r, context(topic)) for r in rows]
        reports = produce(a.bootstrap, [{"topic": topic, "value": v} for v in values])
        assert all(err is None for err, _, _ in reports)
    ids = {t: client.get_latest_version(f"{t}-value").schema_id for t in serializers}

    env = {
        **os.environ,
        "REGISTRY": a.registry_url,
        "BOOTSTRAP": a.bootstrap,
        "AVRO": json.dumps(ORDER),
        "JSON_SCHEMA": json.dumps(ORDER_JSON),
        "PROTO": ORDER_PROTO,
        "COUNT": str(len(records)),
    }
    result = kafkajs(SCRIPT, env, timeout=120)

    # The same schemas under the same subjects: the same ids, in either form.
    assert result["ids"] == {
        "avro": ids["js-avro"],
        "json": ids["js-json"],
        "proto": ids["js-proto"],
    }
    for topic in ("js-avro", "js-json"):
        assert result["decoded"][topic] == records
    # protobufjs writes int64 as a string in JSON.
    assert result["decoded"]["js-proto"] == [{**r, "id": str(r["id"])} for r in records]
    # What kafkajs encoded, confluent-kafka's deserializers read.
    deserializers = {
        "js-avro": AvroDeserializer(client),
        "js-json": JSONDeserializer(None, schema_registry_client=client),
    }
    for topic, deserialize in deserializers.items():
        consumed = consume_all(a.bootstrap, topic, 1, len(records) + 1)
        assert deserialize(consumed[-1].value(), context(topic)) == {
            "id": 1000,
            "item": "from-kafkajs",
        }
    for subject in ("js-avro-value", "js-json-value", "js-proto-value"):
        assert client.get_versions(subject) == [1]  # no second version
