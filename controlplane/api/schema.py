"""The OpenAPI schema says what the API really answers: every operation's error statuses
(all of them the one JSON error shape), and request bodies that refuse unknown fields."""

from __future__ import annotations

ERROR = {
    "type": "object",
    "properties": {
        "error": {"type": "string", "description": "What went wrong, in one line."},
        "details": {
            "type": "object",
            "additionalProperties": True,
            "description": "For a 400: the messages for each field.",
        },
    },
    "required": ["error"],
}
NO_NUL = r"^[^\x00]*$"
NOT_BLANK = r"^[^\x00]*[^\s\x00][^\x00]*$"
WRITES = {"post", "put", "patch", "delete"}


def _error(description: str) -> dict:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _no_nul(schema: dict) -> None:
    """Text fields refuse NUL characters (PostgreSQL cannot store them), and those that
    may not be blank need a character other than white space (they are trimmed): say so."""
    if schema.get("type") == "string" and not ({"pattern", "enum", "format"} & set(schema)):
        schema["pattern"] = NOT_BLANK if schema.get("minLength", 0) >= 1 else NO_NUL


def _acl_rules(schema: dict | None) -> None:
    """Kafka's rules across an ACL's fields, as the schema's ``oneOf``: the cluster
    resource is named ``kafka-cluster``; a prefixed pattern is never ``*``."""
    if schema is None:
        return
    others = [t for t in schema["properties"]["resource_type"].get("enum", []) if t != "cluster"]
    if not others:  # the enum lives in a component: name the types here
        others = ["topic", "group", "transactional_id"]
    schema["properties"] = {k: v for k, v in schema["properties"].items()}
    schema["oneOf"] = [
        {
            "properties": {
                "resource_type": {"enum": ["cluster"]},
                "resource_name": {"enum": ["kafka-cluster"]},
            }
        },
        {
            "properties": {
                "resource_type": {"enum": others},
                "pattern_type": {"enum": ["literal"]},
            }
        },
        {
            "properties": {
                "resource_type": {"enum": others},
                "pattern_type": {"enum": ["prefixed"]},
                "resource_name": {"not": {"enum": ["*"]}},
            },
            "required": ["pattern_type"],
        },
    ]


def document_errors(result, generator, request, public):
    """drf-spectacular post-processing hook: add the ``Error`` component and, to each
    operation, the error statuses it can answer; mark request bodies strict."""
    components = result.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Error"] = ERROR
    for name, schema in schemas.items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False
            for prop in schema.get("properties", {}).values():
                _no_nul(prop)
    _acl_rules(schemas.get("AclCreateRequest"))
    if "SaslCredentialCreateRequest" in schemas:  # a superuser cannot be read-only
        schemas["SaslCredentialCreateRequest"]["not"] = {
            "type": "object",
            "properties": {"superuser": {"enum": [True]}, "read_only": {"enum": [True]}},
            "required": ["superuser", "read_only"],
        }
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query":
                    _no_nul(parameter.get("schema", {}))
            responses = operation.setdefault("responses", {})
            extra = {"401": "Missing, unknown or revoked API key."}
            if method in WRITES or operation.get("parameters") or "requestBody" in operation:
                extra["400"] = "The request does not fit: the message names the field."
            if method in WRITES:
                extra["403"] = (
                    "The API key's role does not allow it (a read-only key's change, an owner-only action)."
                )
            if method in ("post", "put", "patch") or (method == "delete" and "{" in path):
                extra["409"] = "It conflicts with what exists (a name already taken, a "
                "confirmation that does not match, a group with members)."
            if operation.get("parameters"):
                extra["414"] = "The request line is longer than the server takes."
            if "{" in path:
                extra["404"] = "No such object in the caller's organization."
            for status, description in extra.items():
                responses.setdefault(status, _error(description))
            for status, response in responses.items():  # declared by a view, without a body
                if status[0] in "45" and "content" not in response:
                    response.update(_error(response.get("description", "")))
            if "414" in extra:  # the web server's own page, before the app sees the request
                responses["414"] = {
                    "description": extra["414"],
                    "content": {"text/html": {"schema": {"type": "string"}}},
                }
    return result
