"""Answers for requests that fail as a whole, and the exception that closes a connection.

The dispatcher (a handler raised, the control plane is down), a zone's front relaying
to a group's coordinator, the ACL check (no rule allows the call) and handlers refusing
a request outright all answer through `error_response`: every part of the request gets
the error, where the API has a place for one — built from the response schema
(`core.kafka.error_answers`), as Kafka's getErrorResponse.
"""

from __future__ import annotations

from typing import Any

from core.kafka import RequestHeader
from core.kafka.error_answers import error_answer


class CloseConnection(Exception):
    """The request cannot be answered; the connection must be closed (Kafka does).

    `final_response`, when given, is written before closing (a failed SASL login's answer).
    """

    def __init__(self, message: str, final_response: bytes | None = None) -> None:
        super().__init__(message)
        self.final_response = final_response


def error_response(
    header: RequestHeader, body: dict[str, Any], error: int, message: str | None = None
) -> dict[str, Any] | None:
    """A response carrying `error` (and `message`, where the API has error messages) for
    every part of the request; None where the API has no such answer (Metadata: an
    empty answer would read as "no topics"; close instead and let the client retry
    elsewhere) and for acks=0 Produce."""
    return error_answer(header.api_key, header.api_version, body, error, message)
