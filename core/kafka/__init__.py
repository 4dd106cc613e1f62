"""Floe's sans-IO Kafka wire codec: bytes in, frames and dicts out, bytes back.

Typical server loop (the IO lives in the agent server, never here)::

    decoder = FrameDecoder()
    for frame in decoder.feed(data):
        try:
            header, request = decode_request(frame)
        except UnsupportedVersion as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                write(api_versions_fallback_response(exc.header))  # KIP-511
            else:
                close()
        except ProtocolViolation:
            close()
        else:
            write(encode_response(header, handle(header, request)))

Bodies are dicts keyed by Kafka's field names in snake_case; see ``schema``.
"""

from .api_keys import ApiKey
from .codec import (
    RequestHeader,
    api_versions_fallback_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    supported_api_keys,
)
from .errors import (
    ErrorCode,
    FrameTooLarge,
    InvalidRequest,
    KafkaError,
    ProtocolViolation,
    UnsupportedVersion,
    for_code,
)
from .framing import FrameDecoder
from .messages import SUPPORTED_VERSIONS

__all__ = [
    "ApiKey",
    "ErrorCode",
    "FrameDecoder",
    "FrameTooLarge",
    "InvalidRequest",
    "KafkaError",
    "ProtocolViolation",
    "RequestHeader",
    "SUPPORTED_VERSIONS",
    "UnsupportedVersion",
    "api_versions_fallback_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "for_code",
    "supported_api_keys",
]
