"""The request header every Kafka request starts with (decoded by ``codec``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RequestHeader:
    """A request header. ``api_key`` is an ``ApiKey`` when Kafka knows the key."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
