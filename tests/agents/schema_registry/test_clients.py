"""Confluent's serializers through a real agent: records serialized with a schema the
agent's registry assigned an id, produced to its Kafka port, consumed and deserialized
by a second client that only knows the registry's URL; two agents registering at once;
and the registry's tenancy (another cluster's subjects, credentials)."""

from __future__ import annotations

import base64
import json
import threading
import urllib.request
from urllib.error import HTTPError

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.agents.security.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.agents.test_confluent_kafka import consume_all, produce

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "floe.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
ORDER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id", "item"],
}


def _round_trip(a, topic: str, serializer, deserializer, records: list[dict]) -> list[dict]:
    values = [serializer(r, SerializationContext(topic, MessageField.VALUE)) for r in records]
    reports = produce(a.bootstrap, [{"topic": topic, "value": v} for v in values])
    assert all(err is None for err, _, _ in reports)
    consumed = consume_all(a.bootstrap, topic, 1, len(records))
    return [
        deserializer(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in consumed
    ]


def test_avro_and_json_serializers_round_trip_through_the_kafka_port(agent, cluster):
    a = agent(cluster.key)
    records = [{"id": n, "item": f"item-{n}"} for n in range(20)]

    writer = SchemaRegistryClient({"url": a.registry_url})
    serializer = AvroSerializer(writer, json.dumps(ORDER))  # auto-registers orders-value
    # The consumer's client knows nothing but the URL: it fetches the schema by id.
    reader = SchemaRegistryClient({"url": a.registry_url})
    assert _round_trip(a, "orders", serializer, AvroDeserializer(reader), records) == records
    assert writer.get_latest_version("orders-value").version == 1

    json_serializer = JSONSerializer(json.dumps(ORDER_JSON), writer)
    back = _round_trip(
        a,
        "orders-json",
        json_serializer,
        JSONDeserializer(None, schema_registry_client=reader),
        records,
    )
    assert back == records
    assert reader.get_latest_version("orders-json-value").schema.schema_type == "JSON"


def order_message_class():
    """A Protobuf message class built at run time (no protoc): floe.test.Order."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="floe_test_order.proto", package="floe.test", syntax="proto3"
    )
    message = file.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    message.field.add(name="item", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("floe.test.Order"))


def test_protobuf_serializers_round_trip_through_the_kafka_port(agent, cluster):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import descriptor_pb2

    a = agent(cluster.key)
    order = order_message_class()
    records = [order(id=n, item=f"item-{n}") for n in range(10)]
    writer = SchemaRegistryClient({"url": a.registry_url})
    reader = SchemaRegistryClient({"url": a.registry_url})
    serializer = ProtobufSerializer(order, writer, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(order, {"use.deprecated.format": False}, reader)
    assert _round_trip(a, "orders-proto", serializer, deserializer, records) == records
    latest = reader.get_latest_version("orders-proto-value")
    assert (latest.version, latest.schema.schema_type) == (1, "PROTOBUF")
    url = f"{a.registry_url}/subjects/orders-proto-value/versions/1/schema"
    with urllib.request.urlopen(url, timeout=5) as answer:
        # Sent as a descriptor, answered as .proto text (as Confluent's registry does).
        assert answer.read().decode() == latest.schema.schema_str
    assert "message Order {" in latest.schema.schema_str
    # The same schema as .proto text is the same schema: one id, under another subject.
    text = (
        'syntax = "proto3";\npackage floe.test;\nmessage Order { int64 id = 1; string item = 2; }'
    )
    assert writer.register_schema("orders-text", Schema(text, "PROTOBUF")) == latest.schema_id
    # Now kept as the text a person wrote: answered so, and a descriptor sent again (another
    # subject, a fresh serializer) does not replace it.
    again = ProtobufSerializer(order, writer, {"use.deprecated.format": False})
    again(order(id=1, item="x"), SerializationContext("orders-proto-2", MessageField.VALUE))
    fresh = SchemaRegistryClient({"url": a.registry_url})
    assert fresh.get_schema(latest.schema_id).schema_str == text
    # A text-registered schema answers as text, and as a descriptor when asked so.
    other = 'syntax = "proto3";\npackage floe.test;\nmessage Other { string s = 1; }'
    other_id = writer.register_schema("other-text", Schema(other, "PROTOBUF"))
    assert reader.get_schema(other_id).schema_str == other
    url = f"{a.registry_url}/schemas/ids/{other_id}?format=serialized"
    with urllib.request.urlopen(url, timeout=5) as answer:
        descriptor = base64.b64decode(json.loads(answer.read())["schema"])
    assert descriptor_pb2.FileDescriptorProto.FromString(descriptor).message_type[0].name == "Other"
    # Text protoc refuses is a 422 naming the line, never a 500.
    with pytest.raises(SchemaRegistryError) as caught:
        writer.register_schema(
            "p", Schema('syntax = "proto3"; message M { strin s = 1; }', "PROTOBUF")
        )
    assert (caught.value.http_status_code, caught.value.error_code) == (422, 42201)
    assert "strin" in caught.value.error_message


def test_two_agents_registering_at_once_give_one_id_per_schema_and_dense_versions(agent, cluster):
    agents = [agent(cluster.key), agent(cluster.key)]
    schemas = [
        {
            **ORDER,
            "fields": [
                *ORDER["fields"],
                *[{"name": f"f{i}", "type": "int", "default": i} for i in range(n)],
            ],
        }
        for n in range(8)
    ]  # each BACKWARD-compatible with the ones before
    results: list[tuple[str, int, int]] = []  # (subject, schema index, id)
    errors: list[BaseException] = []

    def register(url: str, worker: int) -> None:
        client = SchemaRegistryClient({"url": url, "timeout": 20})
        try:
            for round_ in range(6):
                for index, schema in enumerate(schemas):
                    subject = f"s{(worker + round_ + index) % 3}"
                    client.clear_caches()  # every call reaches the registry
                    results.append(
                        (
                            subject,
                            index,
                            client.register_schema(subject, Schema(json.dumps(schema), "AVRO")),
                        )
                    )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=register, args=(agents[w % 2].registry_url, w)) for w in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(results) == 6 * 6 * 8
    ids_by_schema: dict[int, set[int]] = {}
    for _, index, schema_id in results:
        ids_by_schema.setdefault(index, set()).add(schema_id)
    assert all(len(ids) == 1 for ids in ids_by_schema.values()), ids_by_schema
    assert len({next(iter(ids)) for ids in ids_by_schema.values()}) == len(schemas)
    client = SchemaRegistryClient({"url": agents[1].registry_url})
    for subject in ("s0", "s1", "s2"):
        versions = client.get_versions(subject)
        assert versions == list(range(1, len(versions) + 1))  # dense
        ids = [client.get_version(subject, v).schema_id for v in versions]
        assert len(set(ids)) == len(ids)  # no schema twice in a subject


def _get(url: str, user: str | None = None, password: str | None = None) -> tuple[int, object]:
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_clusters_registry_is_its_own(agent, secure_cluster, other_cluster):
    ours = agent(secure_cluster.key, extra=["--require-sasl"])
    theirs = agent(other_cluster.key, extra=["--require-sasl"])
    other_cluster.user("bob", "bob-password-123")
    secure_cluster.user("carol", "carol-password-123")

    def client(a, user, password):
        return SchemaRegistryClient(
            {"url": a.registry_url, "basic.auth.user.info": f"{user}:{password}"}
        )

    mine = client(ours, "carol", "carol-password-123")
    schema_id = mine.register_schema("private-value", Schema(json.dumps(ORDER), "AVRO"))

    # No credential, a wrong password, another cluster's user: 401.
    assert _get(ours.registry_url + "/subjects")[0] == 401
    assert _get(ours.registry_url + "/subjects", "carol", "wrong")[0] == 401
    status, body = _get(ours.registry_url + "/subjects", "bob", "bob-password-123")
    assert (status, body["error_code"]) == (401, 401)
    assert _get(ours.registry_url + "/subjects", "carol", "carol-password-123") == (
        200,
        ["private-value"],
    )

    # The other cluster's registry knows nothing of ours.
    status, subjects = _get(theirs.registry_url + "/subjects", "bob", "bob-password-123")
    assert (status, subjects) == (200, [])
    status, body = _get(f"{theirs.registry_url}/schemas/ids/{schema_id}", "bob", "bob-password-123")
    assert (status, body["error_code"]) == (404, 40403)
    assert _get(theirs.registry_url + "/subjects", ADMIN_USER, ADMIN_PASSWORD)[0] == 200
