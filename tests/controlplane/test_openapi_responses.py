"""The check every `api` client runs on its answers (`tests.openapi_responses`) fails
an answer outside its documented schema — so the suite's REST calls, all of them, are
checked against the schema the API serves."""

from __future__ import annotations

import json

import pytest

from tests.openapi_responses import check_response

JSON = "application/json"


def test_a_null_where_the_schema_says_integer_fails_and_a_missing_field_too():
    page = {"topic": "t", "partition": 0, "log_start_offset": None, "high_watermark": 0,
            "agent": "a", "records": []}  # fmt: skip
    with pytest.raises(AssertionError, match="log_start_offset"):
        check_response(
            "GET", "/api/v1/clusters/vci_x/topics/t/records/", 200, json.dumps(page).encode(), JSON
        )
    with pytest.raises(AssertionError, match="is a required property"):
        check_response("GET", "/api/v1/clusters/vci_x/", 200, b'{"id": "vci_x"}', JSON)


def test_a_nullable_field_takes_a_null_and_undocumented_answers_are_not_judged():
    page = {"topic": "t", "partition": 0, "log_start_offset": 0, "high_watermark": 0,
            "agent": "a", "records": [], "from_offset": None}  # fmt: skip
    path = "/api/v1/clusters/vci_x/topics/t/records/"
    check_response("GET", path, 200, json.dumps(page).encode(), JSON)
    check_response("GET", path, 299, b'{"anything": 1}', JSON)  # no such status documented
    check_response("GET", "/metrics", 200, b"{}", JSON)  # not the REST API
