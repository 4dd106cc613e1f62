"""The REST API's error handler: a value the database cannot hold is the caller's bad
input (400, saying why), whichever view let it through — never a 500."""

from __future__ import annotations

from django.db import DataError

from controlplane.api.errors import exception_handler


def test_a_data_error_from_the_database_is_a_400_that_says_why():
    exc = DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    response = exception_handler(exc, {"request": None, "view": None})
    assert response.status_code == 400
    assert (
        response.data["error"]
        == "bad value: PostgreSQL text fields cannot contain NUL (0x00) bytes"
    )


def test_other_errors_are_left_to_the_server_error_path():
    assert exception_handler(RuntimeError("a bug of ours"), {"request": None, "view": None}) is None


def _gone(change, deleted) -> dict:
    """What the API answers when `deleted` (another request) ran before `change` did."""
    from django.core.exceptions import ObjectDoesNotExist
    from django.db import DatabaseError

    deleted()
    try:
        change()
    except (DatabaseError, ObjectDoesNotExist) as exc:
        response = exception_handler(exc, {"request": None, "view": None})
    else:
        raise AssertionError("the change found a row that was deleted")
    assert response.status_code == 404
    return response.data


GONE = {"error": "Not found: it was deleted while this request ran."}


def test_a_key_revoked_while_its_cluster_is_deleted_is_a_404_not_a_500(alice):
    """The save finds no row."""
    from virtualclusters import services
    from virtualclusters.models import AgentKey

    key = AgentKey.objects.get(cluster=alice["cluster"])  # the revoking request's copy
    revoke = lambda: services.agent_key_revoke(key=key)  # noqa: E731
    assert _gone(revoke, alice["cluster"].delete) == GONE


def test_configs_changed_while_the_topic_is_deleted_is_a_404_not_a_500(alice):
    """The service's read under a lock finds no row."""
    from metadata_store.models import Topic
    from metadata_store.topics import topic_configs_alter

    topic = Topic.objects.create(cluster=alice["cluster"], name="orders", partition_count=1)
    ops = [{"name": "retention.ms", "value": "1000"}]
    change = lambda: topic_configs_alter(topic=topic, ops=ops, incremental=True)  # noqa: E731
    assert _gone(change, Topic.objects.get(pk=topic.pk).delete) == GONE
