"""Every answer the suite's REST calls get is checked against the OpenAPI schema the API
serves: the ``api`` fixture's client (`SchemaCheckedClient`) validates each JSON body of
a documented operation and status against that response's schema, so an answer that
leaves its schema (a null where the schema says integer, a field it does not name as
nullable) fails the test that got it. Statuses the schema does not document for the
operation are schemathesis's to find (`test_rest_schemathesis_cli.py`)."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from jsonschema import Draft4Validator
from rest_framework.test import APIClient

API_PREFIX = "/api/v1/"


@functools.cache
def _document() -> dict[str, Any]:
    """The schema ``/api/v1/schema/`` serves (drf-spectacular's, rendered to JSON)."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    schema = SchemaGenerator().get_schema(request=None, public=True)
    document: dict[str, Any] = json.loads(OpenApiJsonRenderer().render(schema))
    return document


@functools.cache
def _paths() -> list[tuple[re.Pattern[str], str]]:
    """Each path template as a pattern, literal segments first (``/clusters/new`` is not
    ``/clusters/{id}``)."""
    templates = sorted(_document()["paths"], key=lambda t: (t.count("{"), -len(t)))
    return [
        (re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(t)) + "$"), t)
        for t in templates
    ]


def _json_schema(schema: Any) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema (draft 4, which 3.0's is a dialect of): its
    ``nullable: true`` becomes "this, or null" — as schemathesis reads it, so that
    drf-spectacular's ``{allOf: [$ref], nullable: true}`` takes a null."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: _json_schema(value) for key, value in schema.items() if key != "nullable"}
    if schema.get("nullable") is True:
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


@functools.cache
def _validator(template: str, method: str, status: str) -> Draft4Validator | None:
    operation = _document()["paths"][template].get(method)
    if operation is None:
        return None
    response = operation.get("responses", {}).get(status)
    if response is None:
        return None
    content = response.get("content", {}).get("application/json")
    if content is None or "schema" not in content:
        return None
    # The schema inside a document that holds the components its $refs name.
    root = {**content["schema"], "components": _document().get("components", {})}
    return Draft4Validator(_json_schema(root))


def check_response(method: str, path: str, status: int, body: bytes, content_type: str) -> None:
    """Raise AssertionError when a documented JSON answer does not fit its schema."""
    if not path.startswith(API_PREFIX) or "json" not in content_type or not body:
        return
    template = next((t for pattern, t in _paths() if pattern.match(path)), None)
    if template is None:
        return
    validator = _validator(template, method.lower(), str(status))
    if validator is None:
        return
    errors = sorted(validator.iter_errors(json.loads(body)), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path)
        raise AssertionError(
            f"{method} {path} answered {status} outside its schema ({template}) at "
            f"'{where}': {errors[0].message}"
        )


class SchemaCheckedClient(APIClient):
    """DRF's test client whose every answer is checked against the OpenAPI schema."""

    def request(self, **kwargs: Any):
        response = super().request(**kwargs)
        check_response(
            kwargs.get("REQUEST_METHOD", "GET"),
            kwargs.get("PATH_INFO", ""),
            response.status_code,
            getattr(response, "content", b"") if not response.streaming else b"",
            response.get("Content-Type", ""),
        )
        return response
