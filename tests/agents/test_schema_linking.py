"""Schema linking (issue 38): a migration names a source Schema Registry and a subjects
regex; its copier's agent imports the subjects into the cluster's registry with the same
ids and versions and keeps them in sync until the schemas are cut over.

The only Confluent-API registry on these machines is Floe's own: the source is a SECOND
Floe cluster's registry (its agent's schema-registry role), written to with
confluent-kafka's `SchemaRegistryClient` and serializers; the records produced to the
source with them are read from Floe's mirror and deserialized with confluent-kafka's
deserializers against the destination cluster's registry."""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from urllib.error import HTTPError
from urllib.parse import quote

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests import factories
from tests.agents.clients import fetch_watermarks
from tests.agents.security.conftest import ADMIN_PASSWORD, ADMIN_USER, secure_cluster  # noqa: F401
from tests.agents.test_confluent_kafka import consume_all, produce
from tests.agents.test_migration import _migrate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300), pytest.mark.kafka]

APPEARS_WITHIN_S = 10.0
ORDER_AVRO = {
    "type": "record",
    "name": "Order",
    "namespace": "floe.link",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
ORDER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id", "item"],
}
TOPICS = ("orders-avro", "orders-json", "orders-proto")


def proto_classes():
    """floe.link.Order (a proto3 message with a Money field) in floe_link_order.proto,
    which imports floe_link_money.proto: built at run time (no protoc). confluent-kafka's
    serializer registers the import as its own subject and references it."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    money = descriptor_pb2.FileDescriptorProto(
        name="floe_link_money.proto", package="floe.link", syntax="proto3"
    )
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    m.field.add(name="currency", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    order = descriptor_pb2.FileDescriptorProto(
        name="floe_link_order.proto",
        package="floe.link",
        syntax="proto3",
        dependency=["floe_link_money.proto"],
    )
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    o.field.add(
        name="price",
        number=2,
        type=field.TYPE_MESSAGE,
        type_name=".floe.link.Money",
        label=field.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(money)
    pool.Add(order)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("floe.link.Order")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("floe.link.Money")),
    )


def _request(url: str, auth: tuple[str, str] | None, **options) -> urllib.request.Request:
    request = urllib.request.Request(url, **options)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return request


def _get(url: str, auth: tuple[str, str] | None = None):
    """(status, decoded JSON body) of a GET."""
    try:
        with urllib.request.urlopen(_request(url, auth), timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _put(url: str, body: dict, auth: tuple[str, str] | None = None) -> dict:
    request = _request(
        url,
        auth,
        data=json.dumps(body).encode(),
        method="PUT",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def registry_view(url: str, subjects_regex: str = ".*", auth=None) -> dict:
    """What a registry holds, as Confluent's REST API answers it: the global level, and per
    subject (soft-deleted ones too) its level and every version's whole answer (subject,
    version, id, schema, type, references) with whether it is deleted."""
    import re

    view: dict = {"config": _get(f"{url}/config", auth)[1]}
    for subject in _get(f"{url}/subjects?deleted=true", auth)[1]:
        if not re.fullmatch(subjects_regex, subject):
            continue
        q = quote(subject, safe="")
        status, live = _get(f"{url}/subjects/{q}/versions", auth)
        live = set(live) if status == 200 else set()
        versions = {}
        for v in _get(f"{url}/subjects/{q}/versions?deleted=true", auth)[1]:
            status, answer = _get(f"{url}/subjects/{q}/versions/{v}?deleted=true", auth)
            assert status == 200, answer
            # (A .proto text is kept without its trailing blank lines, as Floe keeps texts.)
            answer["schema"] = answer["schema"].strip()
            versions[v] = {**answer, "deleted": v not in live}
        level = _get(f"{url}/config/{q}", auth)
        view[subject] = {"config": level[1] if level[0] == 200 else None, "versions": versions}
    return view


def _avro(n: int, field: str = "a") -> str:
    return json.dumps(
        {
            "type": "record",
            "name": f"S{n}",
            "namespace": "floe.link",
            "fields": [{"name": field, "type": "string"}],
        }
    )


def _json_schema(n: int, *props: str) -> str:
    return json.dumps(
        {
            "title": f"J{n}",
            "type": "object",
            "properties": {p: {"type": "string"} for p in props},
        }
    )


def test_a_second_floe_clusters_schemas_link_with_their_ids_and_versions(agent, cluster):
    _, source_key = factories.make_cluster("source", org=cluster.cluster.organization)
    source = agent(source_key)
    src = SchemaRegistryClient({"url": source.registry_url})
    # Ids the link must keep, not those Floe would give: two schemas the regex leaves out
    # come first on the source.
    src.register_schema("scratch-1", Schema(_avro(900), "AVRO"))
    src.register_schema("scratch-2", Schema(_avro(901), "AVRO"))
    _put(f"{source.registry_url}/config", {"compatibility": "NONE"})  # copied too

    # 20 subjects: 3 of records (Avro, JSON Schema, Protobuf) and the Protobuf one's
    # import (its own subject, referenced); 9 more Avro, 7 JSON Schema.
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
        future.result(15)
    del admin  # (its client would go on calling the source after it stopped)
    order, money = proto_classes()
    serializers = {
        "orders-avro": AvroSerializer(src, json.dumps(ORDER_AVRO)),
        "orders-json": JSONSerializer(json.dumps(ORDER_JSON), src),
        "orders-proto": ProtobufSerializer(order, src, {"use.deprecated.format": False}),
    }
    records = {
        "orders-avro": [{"id": n, "item": f"item-{n}"} for n in range(30)],
        "orders-json": [{"id": n, "item": f"json-{n}"} for n in range(30)],
        "orders-proto": [
            order(id=n, price=money(cents=100 * n, currency="EUR")) for n in range(30)
        ],
    }
    for topic, serializer in serializers.items():
        values = [
            serializer(r, SerializationContext(topic, MessageField.VALUE)) for r in records[topic]
        ]
        reports = produce(source.bootstrap, [{"topic": topic, "value": v} for v in values])
        assert all(err is None for err, _, _ in reports)
    for n in range(9):  # Avro: versions 1 and (for some) 2
        src.register_schema(f"avro-{n}", Schema(_avro(n), "AVRO"))
        if n % 3 == 0:
            src.register_schema(f"avro-{n}", Schema(_avro(n, "b"), "AVRO"))
    for n in range(7):
        src.register_schema(f"json-{n}", Schema(_json_schema(n, "a"), "JSON"))
    _put(f"{source.registry_url}/config/avro-1", {"compatibility": "FULL"})  # its own level
    # A version soft-deleted, another deleted for good: version numbers with a gap.
    src.register_schema("avro-3", Schema(_avro(3, "c"), "AVRO"))  # version 3
    src.delete_version("avro-3", 2)
    src.delete_version("avro-3", 2, permanent=True)
    src.delete_version("avro-0", 2)  # soft: its id keeps answering
    subjects = [s for s in src.get_subjects() if not s.startswith("scratch-")]
    assert len(subjects) == 20, subjects

    floe = agent(cluster.key)  # every role: the copier's (jobs) and the registry's
    api, url, migration = _migrate(
        cluster,
        {
            "source_bootstrap": source.bootstrap,
            "topics": "orders-.*",
            "source_schema_registry": {"url": source.registry_url},
            "subjects": "(?!scratch-).*",
        },
    )
    detail_url = f"{url}{migration}/"
    regex = "(?!scratch-).*"

    deadline = time.monotonic() + 90
    want = registry_view(source.registry_url, regex)
    while (have := registry_view(floe.registry_url, regex)) != want:
        if time.monotonic() > deadline:
            print(
                json.dumps(
                    {
                        k: (want.get(k), have.get(k))
                        for k in set(want) | set(have)
                        if want.get(k) != have.get(k)
                    },
                    indent=1,
                    default=str,
                )
            )
        assert time.monotonic() < deadline, (api.get(detail_url).json()["schemas"],)
        time.sleep(0.5)
    assert want["config"] == {"compatibilityLevel": "NONE"}
    assert want["avro-1"]["config"] == {"compatibilityLevel": "FULL"}
    assert want["avro-3"]["versions"].keys() == {1, 3}  # the gap is kept
    assert want["avro-0"]["versions"][2]["deleted"]
    assert want["orders-proto-value"]["versions"][1]["references"] == [
        {"name": "floe_link_money.proto", "subject": "floe_link_money.proto", "version": 1}
    ]
    assert _get(f"{floe.registry_url}/subjects/scratch-1/versions")[0] == 404
    # A soft-deleted version's id still answers on Floe: records may carry it.
    deleted_id = want["avro-0"]["versions"][2]["id"]
    assert _get(f"{floe.registry_url}/schemas/ids/{deleted_id}")[0] == 200

    # The records, read on the mirror, deserialize against Floe's registry.
    deadline = time.monotonic() + 60
    while any(
        fetch_watermarks(floe.bootstrap, t, 1) != fetch_watermarks(source.bootstrap, t, 1)
        for t in TOPICS
        if {x["name"] for x in api.get(detail_url).json()["topics"]} >= set(TOPICS)
    ) or {x["name"] for x in api.get(detail_url).json()["topics"]} < set(TOPICS):
        assert time.monotonic() < deadline, api.get(detail_url).json()
        time.sleep(0.5)
    dst = SchemaRegistryClient({"url": floe.registry_url})
    deserializers = {
        "orders-avro": AvroDeserializer(dst),
        "orders-json": JSONDeserializer(None, schema_registry_client=dst),
        "orders-proto": ProtobufDeserializer(order, {"use.deprecated.format": False}, dst),
    }
    for topic, deserializer in deserializers.items():
        consumed = consume_all(floe.bootstrap, topic, 1, len(records[topic]))
        assert [
            deserializer(m.value(), SerializationContext(topic, MessageField.VALUE))
            for m in consumed
        ] == records[topic], topic

    # Linked subjects are written by the link only: a normal registration is refused.
    with pytest.raises(SchemaRegistryError) as refused:
        dst.register_schema("avro-5", Schema(_avro(5, "z"), "AVRO"))
    assert refused.value.error_code == 42205

    # A schema registered on the source while the migration runs appears on Floe.
    started = time.monotonic()
    new_id = src.register_schema("avro-5", Schema(_avro(5, "b"), "AVRO"))
    other_id = src.register_schema("late-subject", Schema(_avro(77), "AVRO"))
    while True:
        got = [
            _get(f"{floe.registry_url}/subjects/{s}/versions/latest")[1]
            for s in ("avro-5", "late-subject")
        ]
        if [(g.get("id"), g.get("version")) for g in got] == [(new_id, 2), (other_id, 1)]:
            break
        assert time.monotonic() - started < APPEARS_WITHIN_S, got
        time.sleep(0.1)
    appeared_s = time.monotonic() - started
    print(f"schema registered on the source appeared on Floe after {appeared_s:.2f} s")

    detail = api.get(detail_url).json()
    assert detail["source_schema_registry"] == {"url": source.registry_url, "username": ""}
    assert detail["schemas"]["state"] == "linking"
    assert detail["schemas"]["error"] == "" and detail["schemas"]["subject_errors"] == {}

    # Cut over: the subjects take registrations on Floe again; the source is not followed.
    cut = api.post(f"{detail_url}cutover/", {"schemas": True}, format="json")
    assert cut.status_code == 200, cut.content
    assert cut.json()["schemas"]["state"] == "cut_over"
    assert cut.json()["schemas"]["subjects_copied"] >= 20
    assert _get(f"{floe.registry_url}/mode/avro-5?defaultToGlobal=true")[1] == {"mode": "READWRITE"}
    assert dst.register_schema("avro-5", Schema(_avro(5, "c"), "AVRO")) > 0


def _wait_equal(
    source_url: str, floe_url: str, auth: tuple[str, str], within_s: float, kept=None
) -> float:
    """Seconds until Floe's registry shows what the source's does (basic auth on the
    source), plus the versions in `kept` ({subject: {version: answer}}: deleted for good
    on the source, kept soft-deleted on Floe); fails after `within_s`."""
    started = time.monotonic()
    while True:
        want = registry_view(source_url, ".*", auth)
        for subject, versions in (kept or {}).items():
            want[subject]["versions"].update(versions)
        have = registry_view(floe_url, ".*")
        if want == have:
            return time.monotonic() - started
        assert time.monotonic() - started < within_s, {
            k: (want.get(k), have.get(k))
            for k in want.keys() | have.keys()
            if want.get(k) != have.get(k)
        }
        time.sleep(0.3)


def test_a_registry_behind_basic_auth_links_and_follows_deletes_and_levels(
    agent,
    cluster,
    secure_cluster,  # noqa: F811 - the fixture imported above
):
    """The source registry requires basic auth (its cluster's SASL users): a wrong
    password shows in the migration's state; the right one links. Versions the source
    deletes (soft, then for good) are soft-deleted on Floe — their ids keep answering —
    and levels set or dropped on the source follow, within a full look (~6 s)."""
    source = agent(secure_cluster.key, extra=["--require-sasl"])
    secure_cluster.user("carol", "carol-password-123")
    src = SchemaRegistryClient(
        {"url": source.registry_url, "basic.auth.user.info": "carol:carol-password-123"}
    )
    auth = ("carol", "carol-password-123")
    _put(f"{source.registry_url}/config", {"compatibility": "NONE"}, auth)
    for n in range(3):
        src.register_schema(f"s-{n}", Schema(_avro(n), "AVRO"))
    ids = [src.register_schema("s-0", Schema(_avro(0, f"f{v}"), "AVRO")) for v in range(2)]
    floe = agent(cluster.key)
    body = {
        "source_bootstrap": source.bootstrap,
        "source_security": {
            "protocol": "SASL_PLAINTEXT",
            "username": ADMIN_USER,
            "password": ADMIN_PASSWORD,
        },
        "topics": "no-topic-matches-this",
        "source_schema_registry": {
            "url": source.registry_url,
            "username": "carol",
            "password": "wrong",
        },
    }
    api, url, wrong = _migrate(cluster, body)
    deadline = time.monotonic() + 20
    while "401" not in (schemas := api.get(f"{url}{wrong}/").json()["schemas"])["error"]:
        assert time.monotonic() < deadline, schemas
        time.sleep(0.3)
    assert schemas["subjects_copied"] == 0 and schemas["state"] == "linking"
    assert api.delete(f"{url}{wrong}/").status_code == 204

    body["source_schema_registry"]["password"] = "carol-password-123"
    _, _, migration = _migrate(cluster, body)
    _wait_equal(source.registry_url, floe.registry_url, auth, 30)
    assert _get(f"{floe.registry_url}/subjects/s-0/versions")[1] == [1, 2, 3]
    third = registry_view(floe.registry_url)["s-0"]["versions"][3]

    # The source deletes: a version soft, another for good, a whole subject soft; sets
    # a subject's level and the global one.
    src.delete_version("s-0", 2)
    src.delete_version("s-0", 3)
    src.delete_version("s-0", 3, permanent=True)
    src.delete_subject("s-2")
    _put(f"{source.registry_url}/config/s-1", {"compatibility": "FULL"}, auth)
    _put(f"{source.registry_url}/config", {"compatibility": "FORWARD"}, auth)
    kept = {"s-0": {3: {**third, "deleted": True}}}
    followed_s = _wait_equal(source.registry_url, floe.registry_url, auth, 20, kept)
    print(f"deletes and levels followed on Floe after {followed_s:.2f} s")
    # On Floe nothing is deleted for good: version 3 is only soft-deleted, its id answers.
    assert _get(f"{floe.registry_url}/subjects/s-0/versions?deleted=true")[1] == [1, 2, 3]
    assert _get(f"{floe.registry_url}/schemas/ids/{ids[1]}")[0] == 200
    assert _get(f"{floe.registry_url}/config")[1] == {"compatibilityLevel": "FORWARD"}
    schemas = api.get(f"{url}{migration}/").json()["schemas"]
    assert schemas["error"] == "" and schemas["subjects_copied"] == 3, schemas
