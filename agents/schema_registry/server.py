"""Confluent's Schema Registry REST API on the agent's `--schema-registry-port`: what
confluent-kafka's `SchemaRegistryClient` and its serializers call, with Confluent's
answers, error bodies (``{"error_code": 40401, "message": …}``) and content type.

When the cluster requires SASL, every request needs HTTP basic auth with one of the
cluster's SASL users (their PLAIN verifier, from the agent's credential cache).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from agents.schema_registry.registry import RestError, SchemaRegistry, parse_version
from agents.security.caches import CredentialCache
from core.schemas.formats import TYPES, ParsedSchema, proto_text, serialized
from core.security.scram import plain_verify

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 2 * 1024 * 1024
_AUTH_CACHE_S = 10.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(payload: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(payload, separators=(",", ":")).encode(),
        status=status,
        content_type=CONTENT_TYPE,
    )


def _schema_text(request: web.Request, schema: ParsedSchema) -> str:
    """A schema's text as registered; a Protobuf one as `.proto` text, or as a base64
    descriptor when the request asks `format=serialized` (what confluent-kafka's
    deserializer asks), whichever form it was registered in — as Confluent answers."""
    if schema.schema_type != "PROTOBUF":
        return schema.text
    if request.query.get("format") == "serialized":
        return serialized(schema)
    return proto_text(schema)


def _text(request: web.Request, schema: ParsedSchema) -> web.Response:
    """The schema itself as the body (`…/schema` endpoints)."""
    return web.Response(text=_schema_text(request, schema), content_type=CONTENT_TYPE)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def _schema_answer(request: web.Request, schema: ParsedSchema, **fields: Any) -> dict[str, Any]:
    answer = dict(fields)
    answer["schema"] = _schema_text(request, schema)
    if schema.schema_type != "AVRO":
        answer["schemaType"] = schema.schema_type
    if schema.references:
        answer["references"] = schema.document()["references"]
    return answer


def _positive(body: Any, key: str, error_code: int) -> int | None:
    """An IMPORT registration's `id` or `version` (absent, or -1 / 0 as some clients send
    for none: None)."""
    value = body.get(key) if isinstance(body, dict) else None
    if value is None or value in (-1, 0):
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value < 2**31:
        raise RestError(error_code, f"Invalid {key} {value!r}: between 1 and {2**31 - 1}")
    return value


class RateLimit:
    """A token bucket per caller: `rate` a second, bursts of twice that."""

    def __init__(self, rate: float) -> None:
        self._rate = rate
        self._burst = 2 * rate
        self._buckets: dict[str, tuple[float, float]] = {}  # caller → (tokens, at)

    def allow(self, caller: str) -> bool:
        now = time.monotonic()
        tokens, at = self._buckets.get(caller, (self._burst, now))
        tokens = min(self._burst, tokens + (now - at) * self._rate)
        if len(self._buckets) > 10_000:
            self._buckets.clear()
        if tokens < 1:
            self._buckets[caller] = (tokens, now)
            return False
        self._buckets[caller] = (tokens - 1, now)
        return True


def _caller(request: web.Request) -> str:
    """Who a request is from, for rate limits: its basic-auth user, else its address."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Basic "):
        try:
            return "user:" + base64.b64decode(header[6:]).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            pass
    return "address:" + (request.remote or "")


class BasicAuth:
    """HTTP basic auth against the cluster's SASL users (their PLAIN verifier)."""

    def __init__(self, credentials: CredentialCache) -> None:
        self._credentials = credentials
        self._good: dict[str, float] = {}  # hash of a checked user:password → until

    async def check(self, header: str) -> bool:
        if not header.startswith("Basic "):
            return False
        try:
            username, _, password = (
                base64.b64decode(header[6:], validate=True).decode().partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            return False
        key = hashlib.sha256(header.encode()).hexdigest()
        if self._good.get(key, 0.0) > time.monotonic():
            return True
        credential = await self._credentials.get(username) if username else None
        if credential is None or not credential.plain_hash:
            return False
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(None, plain_verify, password, credential.plain_hash):
            return False
        if len(self._good) > 10_000:
            self._good.clear()
        self._good[key] = time.monotonic() + _AUTH_CACHE_S
        return True


def build_app(
    registry: SchemaRegistry, auth: BasicAuth | None = None, *, registrations_per_s: float = 100
) -> web.Application:
    """The REST API of `registry`; `auth` set: every request needs basic auth.
    Registrations are limited per caller (`RateLimit`)."""
    limit = RateLimit(registrations_per_s)

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        if auth is not None and not await auth.check(request.headers.get("Authorization", "")):
            response = _json({"error_code": 401, "message": "Unauthorized"}, 401)
            response.headers["WWW-Authenticate"] = 'Basic realm="floe-schema-registry"'
            return response
        try:
            return await handler(request)
        except RestError as exc:
            return _json({"error_code": exc.error_code, "message": str(exc)}, exc.status)
        except web.HTTPException as exc:
            if exc.status == 404:
                return _json({"error_code": 404, "message": "HTTP 404 Not Found"}, 404)
            if exc.status == 405:
                return _json({"error_code": 405, "message": "HTTP 405 Method Not Allowed"}, 405)
            raise
        except Exception:
            log.exception("schema registry: %s %s failed", request.method, request.path)
            return _json({"error_code": 50001, "message": "Internal error"}, 500)

    async def body(request: web.Request) -> Any:
        if request.content_length and request.content_length > MAX_BODY_BYTES:
            raise RestError(
                42201, f"Invalid schema: the body is larger than {MAX_BODY_BYTES} bytes"
            )
        raw = await request.content.read(MAX_BODY_BYTES + 1)
        if len(raw) > MAX_BODY_BYTES:
            raise RestError(
                42201, f"Invalid schema: the body is larger than {MAX_BODY_BYTES} bytes"
            )
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            raise RestError(400, "the body is not JSON") from None

    def schema_id(request: web.Request) -> int:
        try:
            value = int(request.match_info["id"])
        except ValueError:
            value = 0
        if not 1 <= value < 2**31:
            raise RestError(40403, "Schema not found")
        return value

    async def root(request: web.Request) -> web.Response:
        return _json({})

    async def types(request: web.Request) -> web.Response:
        return _json(list(TYPES))

    async def get_schema(request: web.Request) -> web.Response:
        _, schema = await registry.by_id(schema_id(request))
        return _json(_schema_answer(request, schema))

    async def get_schema_text(request: web.Request) -> web.Response:
        _, schema = await registry.by_id(schema_id(request))
        return _text(request, schema)

    async def schema_uses(request: web.Request) -> list[dict[str, Any]]:
        answer = await registry.call(
            "schema_uses", {"id": schema_id(request), "deleted": _flag(request, "deleted")}
        )
        uses: list[dict[str, Any]] = answer["uses"]
        subject = request.query.get("subject")
        return [u for u in uses if subject is None or u["subject"] == subject]

    async def schema_subjects(request: web.Request) -> web.Response:
        return _json(sorted({u["subject"] for u in await schema_uses(request)}))

    async def schema_versions(request: web.Request) -> web.Response:
        return _json(await schema_uses(request))

    async def subjects(request: web.Request) -> web.Response:
        answer = await registry.call(
            "subjects",
            {
                "deleted": _flag(request, "deleted"),
                "prefix": request.query.get("subjectPrefix", ""),
            },
        )
        return _json(answer["subjects"])

    async def subject_versions(request: web.Request) -> web.Response:
        listed = await registry.versions(
            request.match_info["subject"], deleted=_flag(request, "deleted")
        )
        return _json([v["version"] for v in listed["versions"]])

    async def _version(request: web.Request) -> tuple[dict[str, Any], ParsedSchema]:
        subject = request.match_info["subject"]
        number = parse_version(request.match_info["version"])
        entry = await registry.version(subject, number, deleted=_flag(request, "deleted"))
        return entry, await registry.schema_for(entry["fingerprint"])

    async def get_version(request: web.Request) -> web.Response:
        entry, schema = await _version(request)
        return _json(
            _schema_answer(
                request,
                schema,
                subject=request.match_info["subject"],
                version=entry["version"],
                id=entry["id"],
            )
        )

    async def get_version_text(request: web.Request) -> web.Response:
        _, schema = await _version(request)
        return _text(request, schema)

    async def referenced_by(request: web.Request) -> web.Response:
        entry, _ = await _version(request)
        answer = await registry.call(
            "referenced_by",
            {"subject": request.match_info["subject"], "version": entry["version"]},
        )
        return _json(answer["ids"])

    async def register(request: web.Request) -> web.Response:
        if not limit.allow(_caller(request)):
            raise RestError(
                42901, f"Too many registrations: at most {registrations_per_s:g} a second"
            )
        given = await body(request)
        schema = await registry.parse_request(given)
        answer = await registry.register(
            request.match_info["subject"],
            schema,
            schema_id=_positive(given, "id", 42205),
            version=_positive(given, "version", 42202),
        )
        return _json({"id": answer["id"]})

    async def lookup(request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        schema = await registry.parse_request(await body(request))
        entry = await registry.lookup(subject, schema, deleted=_flag(request, "deleted"))
        return _json(
            _schema_answer(
                request, schema, subject=subject, version=entry["version"], id=entry["id"]
            )
        )

    async def delete_subject(request: web.Request) -> web.Response:
        answer = await registry.call(
            "delete_subject",
            {"subject": request.match_info["subject"], "permanent": _flag(request, "permanent")},
        )
        if _flag(request, "permanent"):
            registry.forget_ids()
        return _json(answer["versions"])

    async def delete_version(request: web.Request) -> web.Response:
        answer = await registry.call(
            "delete_version",
            {
                "subject": request.match_info["subject"],
                "version": parse_version(request.match_info["version"]),
                "permanent": _flag(request, "permanent"),
            },
        )
        if _flag(request, "permanent"):
            registry.forget_ids()
        return _json(answer["version"])

    def config_subject(request: web.Request) -> str | None:
        return request.match_info.get("subject")

    async def get_config(request: web.Request) -> web.Response:
        answer = await registry.call(
            "config_get",
            {
                "subject": config_subject(request),
                "default_to_global": _flag(request, "defaultToGlobal"),
            },
        )
        return _json({"compatibilityLevel": answer["compatibility"]})

    async def put_config(request: web.Request) -> web.Response:
        given = await body(request)
        level = given.get("compatibility") if isinstance(given, dict) else None
        if not isinstance(level, str):
            raise RestError(42203, "Invalid compatibility level: the body needs 'compatibility'")
        answer = await registry.call(
            "config_set", {"subject": config_subject(request), "compatibility": level}
        )
        return _json({"compatibility": answer["compatibility"]})

    async def delete_config(request: web.Request) -> web.Response:
        answer = await registry.call("config_delete", {"subject": config_subject(request)})
        return _json({"compatibilityLevel": answer["compatibility"]})

    async def get_mode(request: web.Request) -> web.Response:
        answer = await registry.call(
            "mode_get",
            {
                "subject": config_subject(request),
                "default_to_global": _flag(request, "defaultToGlobal"),
            },
        )
        return _json({"mode": answer["mode"]})

    async def put_mode(request: web.Request) -> web.Response:
        given = await body(request)
        mode = given.get("mode") if isinstance(given, dict) else None
        if not isinstance(mode, str):
            raise RestError(42204, "Invalid mode: the body needs 'mode'")
        answer = await registry.call(
            "mode_set",
            {"subject": config_subject(request), "mode": mode, "force": _flag(request, "force")},
        )
        return _json({"mode": answer["mode"]})

    async def delete_mode(request: web.Request) -> web.Response:
        answer = await registry.call("mode_delete", {"subject": config_subject(request)})
        return _json({"mode": answer["mode"]})

    async def compatibility(request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        schema = await registry.parse_request(await body(request))
        listed = await registry.versions(subject)
        live = listed["versions"]
        level = listed["compatibility"]
        if "version" in request.match_info:
            entry = await registry.version(subject, parse_version(request.match_info["version"]))
            against = [entry]
            # One version named: its direction(s) only, never transitive.
            level = level.removesuffix("_TRANSITIVE")
        else:
            against = live
        problems = await registry.problems(schema, level, against)
        answer: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            answer["messages"] = problems
        return _json(answer)

    app = web.Application(middlewares=[errors], client_max_size=MAX_BODY_BYTES)
    r = app.router
    r.add_get("/", root)
    r.add_get("/schemas/types", types)
    r.add_get("/schemas/ids/{id}", get_schema)
    r.add_get("/schemas/ids/{id}/schema", get_schema_text)
    r.add_get("/schemas/ids/{id}/subjects", schema_subjects)
    r.add_get("/schemas/ids/{id}/versions", schema_versions)
    r.add_get("/subjects", subjects)
    r.add_post("/subjects/{subject}", lookup)
    r.add_delete("/subjects/{subject}", delete_subject)
    r.add_get("/subjects/{subject}/versions", subject_versions)
    r.add_post("/subjects/{subject}/versions", register)
    r.add_get("/subjects/{subject}/versions/{version}", get_version)
    r.add_delete("/subjects/{subject}/versions/{version}", delete_version)
    r.add_get("/subjects/{subject}/versions/{version}/schema", get_version_text)
    r.add_get("/subjects/{subject}/versions/{version}/referencedby", referenced_by)
    for path in ("/config", "/config/{subject}"):
        r.add_get(path, get_config)
        r.add_put(path, put_config)
        r.add_delete(path, delete_config)
    for path in ("/mode", "/mode/{subject}"):
        r.add_get(path, get_mode)
        r.add_put(path, put_mode)
        r.add_delete(path, delete_mode)
    r.add_post("/compatibility/subjects/{subject}/versions", compatibility)
    r.add_post("/compatibility/subjects/{subject}/versions/{version}", compatibility)
    return app
