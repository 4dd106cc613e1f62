"""ACLs enforced by live agents (cluster config `acls_enabled`), managed over Kafka's admin
API and the REST API, with real clients."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.agents.security.clients import confluent_config, wait_for
from tests.agents.security.conftest import ADMIN_PASSWORD, ADMIN_USER
from virtualclusters.security.services import acl_binding, acl_create

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]
SASL = ["--require-sasl"]


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient(confluent_config(bootstrap, ADMIN_USER, ADMIN_PASSWORD))


def allow(principal: str, operation, resource_type=ResourceType.TOPIC, name="*", **kw):
    return AclBinding(
        resource_type,
        name,
        kw.get("pattern", ResourcePatternType.LITERAL),
        principal,
        "*",
        operation,
        kw.get("permission", AclPermissionType.ALLOW),
    )


def create_acls(bootstrap: str, bindings: list[AclBinding]) -> None:
    admin = admin_client(bootstrap)  # keep the handle alive until the futures resolve
    for future in admin.create_acls(bindings, request_timeout=10).values():
        assert future.result(15) is None


def seed_topic(bootstrap: str, topic: str, count: int = 3, partitions: int = 1) -> None:
    """Create `topic` and write `count` messages to partition 0, as the superuser."""
    admin = admin_client(bootstrap)
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(15)
    producer = Producer({**confluent_config(bootstrap, ADMIN_USER, ADMIN_PASSWORD), "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"%s-%d" % (topic.encode(), i), partition=0)
    assert producer.flush(20) == 0


def produce_errors(bootstrap: str, user: str, password: str, topic: str) -> list:
    producer = Producer(
        {
            **confluent_config(bootstrap, user, password),
            "linger.ms": 5,
            "message.timeout.ms": 5000,
            "log_level": 0,
        }
    )
    errors: list = []
    producer.produce(topic, value=b"x", partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(15)
    return errors


def delivered(bootstrap: str, user: str, password: str, topic: str) -> bool:
    # `KafkaError == None` trips a confluent-kafka bug (a TypeError left set): test `is`.
    return [e is None for e in produce_errors(bootstrap, user, password, topic)] == [True]


def test_a_reader_is_refused_until_an_acl_created_over_kafka_lets_it_read(agent, acl_cluster):
    password = acl_cluster.user("reader")
    a = agent(acl_cluster.key, extra=SASL)
    seed_topic(a.bootstrap, "secrets")
    # The reader may use its group and see the topic (DESCRIBE), but not READ it.
    # (Without DESCRIBE, Metadata already says TOPIC_AUTHORIZATION_FAILED — see the next
    # test — and librdkafka's assign() then waits silently instead of reporting it.)
    create_acls(
        a.bootstrap,
        [
            allow("User:reader", AclOperation.READ, ResourceType.GROUP),
            allow("User:reader", AclOperation.DESCRIBE, name="secrets"),
        ],
    )

    consumer = Consumer(
        {
            **confluent_config(a.bootstrap, "reader", password),
            "group.id": "readers",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition("secrets", 0, 0)])
    try:

        def refused():
            message = consumer.poll(0.2)
            return message is not None and message.error() is not None and message.error()

        error = wait_for(refused, timeout_s=10)
        assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        create_acls(a.bootstrap, [allow("User:reader", AclOperation.READ, name="secrets")])
        granted_at = time.monotonic()
        values: list[bytes] = []
        while len(values) < 3 and time.monotonic() - granted_at < 10:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
        assert values == [b"secrets-0", b"secrets-1", b"secrets-2"]
    finally:
        consumer.close()


def test_metadata_lists_only_describable_topics(agent, acl_cluster):
    password = acl_cluster.user("viewer")
    a = agent(acl_cluster.key, extra=SASL)
    for name in ("public-a", "public-b", "hidden"):
        seed_topic(a.bootstrap, name, count=0)
    create_acls(
        a.bootstrap,
        [
            allow(
                "User:viewer",
                AclOperation.DESCRIBE,
                name="public-",
                pattern=ResourcePatternType.PREFIXED,
            )
        ],
    )
    viewer = AdminClient({**confluent_config(a.bootstrap, "viewer", password)})
    assert set(viewer.list_topics(timeout=10).topics) == {"public-a", "public-b"}
    hidden = viewer.list_topics("hidden", timeout=10).topics["hidden"]
    assert hidden.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert set(admin_client(a.bootstrap).list_topics(timeout=10).topics) >= {
        "public-a",
        "public-b",
        "hidden",
    }


def test_authorized_operations_are_what_the_principals_acls_allow(agent, acl_cluster):
    """KIP-430, as librdkafka's 0081 checks it: READ on a topic answers READ and DESCRIBE
    (implied); the superuser gets every operation of the topic, the cluster and a group."""
    from confluent_kafka import TopicCollection

    password = acl_cluster.user("auditor")
    a = agent(acl_cluster.key, extra=SASL)
    seed_topic(a.bootstrap, "audited", count=0)
    create_acls(
        a.bootstrap,
        [
            allow("User:auditor", AclOperation.READ, name="audited"),
            allow("User:auditor", AclOperation.DESCRIBE, ResourceType.GROUP, name="auditors"),
        ],
    )
    auditor = AdminClient(confluent_config(a.bootstrap, "auditor", password))
    admin = admin_client(a.bootstrap)

    def topic_ops(client) -> set:
        futures = client.describe_topics(
            TopicCollection(["audited"]), include_authorized_operations=True
        )
        return set(futures["audited"].result(15).authorized_operations)

    def group_ops(client) -> set:
        futures = client.describe_consumer_groups(["auditors"], include_authorized_operations=True)
        return set(futures["auditors"].result(15).authorized_operations)

    assert topic_ops(auditor) == {AclOperation.READ, AclOperation.DESCRIBE}
    assert group_ops(auditor) == {AclOperation.DESCRIBE}
    assert auditor.describe_cluster(include_authorized_operations=True).result(
        15
    ).authorized_operations in (None, [])
    every_topic_operation = {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }  # fmt: skip
    assert topic_ops(admin) == every_topic_operation
    assert group_ops(admin) == {AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE}
    assert (
        len(
            admin.describe_cluster(include_authorized_operations=True)
            .result(15)
            .authorized_operations
        )
        == 7
    )


def test_writes_need_write_and_deny_wins(agent, acl_cluster):
    password = acl_cluster.user("writer")
    a = agent(acl_cluster.key, extra=SASL)
    for name in ("logs-app", "logs-audit", "other"):
        seed_topic(a.bootstrap, name, count=0)
    create_acls(
        a.bootstrap,
        [
            allow(
                "User:writer",
                AclOperation.WRITE,
                name="logs-",
                pattern=ResourcePatternType.PREFIXED,
            ),
            allow(
                "User:*",
                AclOperation.WRITE,
                name="logs-audit",
                permission=AclPermissionType.DENY,
            ),
        ],
    )
    assert delivered(a.bootstrap, "writer", password, "logs-app")
    [denied] = produce_errors(a.bootstrap, "writer", password, "logs-audit")
    assert denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [denied] = produce_errors(a.bootstrap, "writer", password, "other")
    assert denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_topic_administration_needs_create_delete_and_alter(agent, acl_cluster):
    password = acl_cluster.user("ops")
    a = agent(acl_cluster.key, extra=SASL)
    ops = AdminClient(confluent_config(a.bootstrap, "ops", password))
    with pytest.raises(KafkaException) as refused:
        ops.create_topics([NewTopic("made-by-ops", 1, 1)])["made-by-ops"].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    create_acls(
        a.bootstrap,
        [
            allow("User:ops", AclOperation.CREATE, name="made-by-"),
            allow(
                "User:ops",
                AclOperation.CREATE,
                name="made-by-",
                pattern=ResourcePatternType.PREFIXED,
            ),
        ],
    )
    ops.create_topics([NewTopic("made-by-ops", 1, 1)])["made-by-ops"].result(15)
    with pytest.raises(KafkaException) as refused:
        ops.delete_topics(["made-by-ops"])["made-by-ops"].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(a.bootstrap, [allow("User:ops", AclOperation.DELETE, name="made-by-ops")])
    ops.delete_topics(["made-by-ops"])["made-by-ops"].result(15)


def test_acls_are_managed_over_kafka_only_by_the_cluster_admin(agent, acl_cluster):
    password = acl_cluster.user("someone")
    a = agent(acl_cluster.key, extra=SASL)
    someone = AdminClient(confluent_config(a.bootstrap, "someone", password))
    binding = allow("User:someone", AclOperation.ALL)
    with pytest.raises(KafkaException) as refused:
        someone.create_acls([binding])[binding].result(15)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    admin = admin_client(a.bootstrap)
    create_acls(a.bootstrap, [binding, allow("User:other", AclOperation.READ, name="t")])
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    described = admin.describe_acls(everything).result(15)
    assert sorted(b.principal for b in described) == ["User:other", "User:someone"]

    mine = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:someone",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deleted = admin.delete_acls([mine])[mine].result(15)
    assert [b.principal for b in deleted] == ["User:someone"]
    remaining = admin.describe_acls(everything).result(15)
    assert [b.principal for b in remaining] == ["User:other"]


def test_acls_created_over_rest_reach_a_running_agent_within_seconds(agent, acl_cluster):
    password = acl_cluster.user("late")
    a = agent(acl_cluster.key, extra=SASL)
    seed_topic(a.bootstrap, "later", count=0)
    [denied] = produce_errors(a.bootstrap, "late", password, "later")
    assert denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    acl_create(
        cluster=acl_cluster.cluster,
        binding=acl_binding(
            {
                "resource_type": "topic",
                "resource_name": "later",
                "principal": "User:late",
                "operation": "write",
            }
        ),
    )
    wait_for(lambda: delivered(a.bootstrap, "late", password, "later"), 10)


def test_superusers_bypass_acls_and_read_only_users_cannot_write(agent, secure_cluster):
    reader_password = secure_cluster.user("auditor", read_only=True)
    a = agent(secure_cluster.key, extra=SASL)
    seed_topic(a.bootstrap, "books", count=2)  # as the superuser, with no ACL at all
    [denied] = produce_errors(a.bootstrap, "auditor", reader_password, "books")
    assert denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    consumer = Consumer(
        {
            **confluent_config(a.bootstrap, "auditor", reader_password),
            "group.id": "audit",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("books", 0, 0)])
    values: list = []
    try:
        deadline = time.monotonic() + 15
        while len(values) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    assert values == [b"books-0", b"books-1"]


def test_consumer_groups_need_read_on_the_group(agent, acl_cluster):
    password = acl_cluster.user("member")
    a = agent(acl_cluster.key, extra=SASL)
    seed_topic(a.bootstrap, "jobs", count=2)
    create_acls(a.bootstrap, [allow("User:member", AclOperation.READ, name="jobs")])

    def subscriber(group: str) -> Consumer:
        consumer = Consumer(
            {
                **confluent_config(a.bootstrap, "member", password),
                "group.id": group,
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        consumer.subscribe(["jobs"])
        return consumer

    refused = subscriber("workers")
    try:

        def group_error():
            message = refused.poll(0.2)
            return message is not None and message.error() is not None and message.error()

        assert wait_for(group_error, 15).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        refused.close()

    create_acls(
        a.bootstrap, [allow("User:member", AclOperation.READ, ResourceType.GROUP, "workers")]
    )
    consumer = subscriber("workers")
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(values) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert values == [b"jobs-0", b"jobs-1"]
