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


def test_a_change_to_a_row_deleted_meanwhile_is_a_404_not_a_500(alice):
    """A key revoked while another request deletes its cluster: the save finds no row."""
    from django.db import DatabaseError

    from virtualclusters import services
    from virtualclusters.models import AgentKey

    key = AgentKey.objects.get(cluster=alice["cluster"])  # the revoking request's copy
    alice["cluster"].delete()  # the concurrent request's delete, cascading to its keys
    try:
        services.agent_key_revoke(key=key)
    except DatabaseError as exc:
        response = exception_handler(exc, {"request": None, "view": None})
    else:
        raise AssertionError("the save found a row that was deleted")
    assert response.status_code == 404
    assert response.data == {"error": "Not found: it was deleted while this request ran."}
