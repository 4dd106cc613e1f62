"""The agent's Schema Registry against confluent-kafka's own `SchemaRegistryClient`: the
calls it makes, Confluent's answers and error codes, one agent process of a real control
plane (ids and versions in PostgreSQL, texts in the cluster's bucket)."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from urllib.error import HTTPError

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "floe.test",
    "fields": [{"name": "name", "type": "string"}],
}
USER_V2 = {  # BACKWARD-compatible: the new field has a default
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "age", "type": "int", "default": 0}],
}
USER_NO_DEFAULT = {  # not BACKWARD-compatible: the new field has no default
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": "string"}],
}


def avro(document: dict) -> Schema:
    return Schema(json.dumps(document), "AVRO")


def code_of(call) -> tuple[int, int]:
    with pytest.raises(SchemaRegistryError) as caught:
        call()
    return caught.value.http_status_code, caught.value.error_code


@pytest.fixture
def registry(agent, cluster):
    a = agent(cluster.key)
    assert a.registry_port, "the agent serves no schema registry by default"
    return a, SchemaRegistryClient({"url": a.registry_url, "timeout": 10})


def test_it_registers_looks_up_and_serves_schemas_by_id(registry, bucket_url):
    a, client = registry
    first = client.register_schema("users-value", avro(USER_V1))
    assert first >= 1
    # The same schema, written with other white space and key order: the same id, and
    # registering again is idempotent.
    reordered = json.dumps(
        {"fields": USER_V1["fields"], "name": "User", "type": "record", "namespace": "floe.test"},
        indent=2,
    )
    assert client.register_schema("users-value", Schema(reordered, "AVRO")) == first
    assert client.register_schema("other-value", avro(USER_V1)) == first  # ids are global

    second = client.register_schema("users-value", avro(USER_V2))
    assert second != first
    fetched = SchemaRegistryClient({"url": a.registry_url}).get_schema(second)
    assert json.loads(fetched.schema_str) == USER_V2 and fetched.schema_type == "AVRO"

    for path in (f"/schemas/ids/{first}/schema", "/subjects/users-value/versions/latest/schema"):
        with urllib.request.urlopen(a.registry_url + path, timeout=5) as answer:
            assert json.loads(answer.read()) in (USER_V1, USER_V2)
    found = client.lookup_schema("users-value", avro(USER_V1))
    assert (found.schema_id, found.version, found.subject) == (first, 1, "users-value")
    latest = client.get_latest_version("users-value")
    assert (latest.version, latest.schema_id) == (2, second)
    assert client.get_version("users-value", 1).schema_id == first
    assert client.get_versions("users-value") == [1, 2]
    assert sorted(client.get_subjects()) == ["other-value", "users-value"]
    assert client.get_schema_types() == ["AVRO", "JSON", "PROTOBUF"]
    versions = client.get_schema_versions(first)
    assert sorted((v.subject, v.version) for v in versions) == [
        ("other-value", 1),
        ("users-value", 1),
    ]

    # The text lives in the cluster's bucket, content-addressed; nowhere else.
    texts = list((Path(bucket_url.removeprefix("file://")) / a.cluster_id / "_schemas").iterdir())
    assert len(texts) == 2 and all(p.suffix == ".json" for p in texts)


def test_it_answers_confluents_error_codes(registry):
    a, client = registry
    client.register_schema("s", avro(USER_V1))
    assert code_of(lambda: client.get_latest_version("nope")) == (404, 40401)
    assert code_of(lambda: client.get_version("s", 7)) == (404, 40402)
    assert code_of(lambda: client.get_schema(9999)) == (404, 40403)
    assert code_of(lambda: client.lookup_schema("s", avro(USER_V2))) == (404, 40403)
    assert code_of(lambda: client.register_schema("s", Schema("{not json", "AVRO"))) == (422, 42201)
    assert code_of(
        lambda: client.register_schema(
            "s",
            Schema(
                '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nosuch"}]}',
                "AVRO",
            ),
        )
    ) == (422, 42201)
    assert code_of(lambda: client.register_schema("s", avro(USER_NO_DEFAULT))) == (409, 409)
    assert code_of(lambda: client.set_compatibility("s", "SIDEWAYS")) == (422, 42203)
    with pytest.raises(HTTPError) as caught:
        urllib.request.urlopen(a.registry_url + "/subjects/s/versions/zero", timeout=5)
    assert caught.value.code == 422
    assert json.loads(caught.value.read())["error_code"] == 42202
    assert caught.value.headers["Content-Type"].startswith("application/vnd.schemaregistry.v1+json")


def test_compatibility_levels_are_kept_per_subject_and_globally(registry):
    a, client = registry
    url = a.registry_url
    client.register_schema("s", avro(USER_V1))
    assert client.get_compatibility() == "BACKWARD"
    assert client.test_compatibility("s", avro(USER_V2)) is True
    assert client.test_compatibility("s", avro(USER_NO_DEFAULT)) is False
    assert client.test_compatibility_all_versions("s", avro(USER_NO_DEFAULT)) is False

    client.set_compatibility("s", "FORWARD")  # old readers read new data: adding is fine
    assert client.get_compatibility("s") == "FORWARD"
    assert client.register_schema("s", avro(USER_NO_DEFAULT)) > 0
    client.set_compatibility(level="NONE")
    assert client.get_compatibility() == "NONE"
    assert client.get_compatibility("s") == "FORWARD"  # the subject's own level wins
    assert client.delete_config("s").compatibility_level == "FORWARD"
    assert code_of(lambda: client.get_compatibility("s")) == (404, 40408)
    with urllib.request.urlopen(f"{url}/config/s?defaultToGlobal=true", timeout=5) as answer:
        assert json.loads(answer.read()) == {"compatibilityLevel": "NONE"}


def test_soft_and_permanent_deletes(registry):
    _, client = registry
    first = client.register_schema("s", avro(USER_V1))
    client.register_schema("s", avro(USER_V2))
    # Permanent before soft: refused (40407).
    assert code_of(lambda: client.delete_version("s", 1, permanent=True)) == (404, 40407)
    assert client.delete_version("s", 1) == 1
    assert client.get_versions("s") == [2]
    assert code_of(lambda: client.delete_version("s", 1)) == (404, 40406)
    assert client.delete_version("s", 1, permanent=True) == 1
    assert client.delete_subject("s") == [2]
    assert client.get_subjects() == []
    assert "s" in client.get_subjects(deleted=True)
    assert client.delete_subject("s", permanent=True) == [2]
    assert code_of(lambda: client.get_versions("s")) == (404, 40401)
    # Registering after: ids are never reused.
    again = client.register_schema("s", avro(USER_V1))
    assert again != first


def test_references_and_referenced_by(registry):
    _, client = registry
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "floe.test",
        "fields": [{"name": "city", "type": "string"}],
    }
    client.register_schema("address", avro(address))
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "floe.test",
        "fields": [{"name": "home", "type": "floe.test.Address"}],
    }
    with_ref = Schema(
        json.dumps(person), "AVRO", [SchemaReference("floe.test.Address", "address", 1)]
    )
    person_id = client.register_schema("person", with_ref)
    assert client.get_version("person", 1).schema.references[0].subject == "address"
    assert client.get_referenced_by("address", 1) == [person_id]
    # A schema naming a type nobody defines is invalid; a referenced version cannot go.
    assert code_of(lambda: client.register_schema("p2", avro(person))) == (422, 42201)
    assert code_of(lambda: client.delete_version("address", 1)) == (422, 42206)


def test_json_schemas_are_checked_for_compatibility_too(registry):
    _, client = registry

    def json_schema(properties: dict, closed: bool) -> Schema:
        document = {"type": "object", "properties": properties, "additionalProperties": not closed}
        return Schema(json.dumps(document), "JSON")

    name = {"name": {"type": "string"}}
    name_age = {**name, "age": {"type": "integer"}}
    client.register_schema("open", json_schema(name, closed=False))
    # BACKWARD: a property added to an open content model is refused, to a closed one not.
    assert code_of(lambda: client.register_schema("open", json_schema(name_age, False))) == (
        409,
        409,
    )
    client.register_schema("closed", json_schema(name, closed=True))
    assert client.register_schema("closed", json_schema(name_age, closed=True)) > 0
    assert client.get_latest_version("closed").schema.schema_type == "JSON"


def test_registrations_are_rate_limited_per_caller(agent, cluster):
    a = agent(cluster.key, extra=["--schema-registry-rate", "1"])  # bursts of 2
    body = json.dumps({"schema": json.dumps(USER_V1)}).encode()

    def post(subject: str) -> tuple[int, int | None]:
        request = urllib.request.Request(
            f"{a.registry_url}/subjects/{subject}/versions", data=body, method="POST"
        )
        request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status, None
        except HTTPError as exc:
            return exc.code, json.loads(exc.read())["error_code"]

    outcomes = [post(f"s{n}") for n in range(4)]
    assert outcomes[:2] == [(200, None), (200, None)] and (429, 42901) in outcomes[2:], outcomes
    # confluent-kafka's client waits and retries a 429: it gets through, at the rate. Its
    # waits are "full jitter" (random in [0, 1 s·2^i]): with its default 3 retries, all three
    # land within the bucket's 1 s refill about once in 48 runs, so give it more tries.
    client = SchemaRegistryClient({"url": a.registry_url, "max.retries": 8})
    assert client.register_schema("later", avro(USER_V1)) > 0


def test_readonly_mode_refuses_registrations_with_confluents_code(registry):
    a, client = registry
    client.register_schema("users-value", avro(USER_V1))
    assert client.get_global_mode() == "READWRITE"
    assert client.update_global_mode("READONLY") == "READONLY"
    assert code_of(lambda: client.register_schema("users-value", avro(USER_V2))) == (422, 42205)
    assert code_of(lambda: client.delete_subject("users-value")) == (422, 42205)
    assert client.get_latest_version("users-value").version == 1  # reads go on
    # A subject's own mode wins over the global one.
    assert client.update_mode("free-value", "READWRITE") == "READWRITE"
    assert client.register_schema("free-value", avro(USER_V1)) >= 1
    assert client.get_mode("free-value") == "READWRITE"
    assert code_of(lambda: client.get_mode("users-value")) == (404, 40409)
    assert client.update_global_mode("READWRITE") == "READWRITE"
    assert client.update_mode("users-value", "READONLY") == "READONLY"
    assert code_of(lambda: client.register_schema("users-value", avro(USER_V2))) == (422, 42205)
    assert client.delete_mode("users-value") == "READONLY"
    assert client.register_schema("users-value", avro(USER_V2)) >= 1
    assert code_of(lambda: client.update_global_mode("SOMETIMES")) == (422, 42204)


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())
    except HTTPError as exc:
        return json.loads(exc.read())


def test_import_mode_registers_with_the_id_and_version_given(registry):
    a, client = registry
    versions = f"{a.registry_url}/subjects/imported-value/versions"
    given = {"schema": json.dumps(USER_V1), "id": 4242, "version": 7}
    # READWRITE refuses an id; IMPORT needs an empty registry (or force).
    assert post(versions, given)["error_code"] == 42205
    client.register_schema("existing-value", avro(USER_NO_DEFAULT))
    assert code_of(lambda: client.update_global_mode("IMPORT")) == (422, 42205)
    assert client.update_global_mode("IMPORT", force=True) == "IMPORT"
    assert post(versions, given) == {"id": 4242}
    assert client.get_schema(4242).schema_str == json.dumps(USER_V1, separators=(",", ":"))
    assert client.get_version("imported-value", 7).schema_id == 4242
    # Another schema under that id is refused; one without an id too, in IMPORT.
    other = {"schema": json.dumps(USER_NO_DEFAULT), "id": 4242}
    assert post(versions, other)["error_code"] == 42205
    assert code_of(lambda: client.register_schema("x-value", avro(USER_V2))) == (422, 42205)
    client.update_global_mode("READWRITE")
    assert client.register_schema("x-value", avro(USER_V2)) == 4243  # past every id taken


def test_a_permanently_deleted_id_is_gone_from_every_agents_cache(agent, cluster):
    # This agent trusts a cached id for 1 s (--schema-cache), the other deletes.
    a = agent(cluster.key, extra=["--schema-cache", "1"])
    b = agent(cluster.key)
    on_b = SchemaRegistryClient({"url": b.registry_url, "timeout": 10})
    schema_id = on_b.register_schema("gone-value", avro(USER_V1))
    url = f"{a.registry_url}/schemas/ids/{schema_id}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert json.loads(answer.read())["schema"]
    with urllib.request.urlopen(f"{b.registry_url}/schemas/ids/{schema_id}", timeout=10):
        pass  # cached on b too
    on_b.delete_subject("gone-value")
    on_b.delete_subject("gone-value", permanent=True)
    # The deleting agent forgets at once (a new client: confluent-kafka caches too).
    fresh_b = SchemaRegistryClient({"url": b.registry_url, "timeout": 10})
    assert code_of(lambda: fresh_b.get_schema(schema_id)) == (404, 40403)
    # The other within its bound.
    time.sleep(1.2)
    fresh_a = SchemaRegistryClient({"url": a.registry_url, "timeout": 10})
    assert code_of(lambda: fresh_a.get_schema(schema_id)) == (404, 40403)
