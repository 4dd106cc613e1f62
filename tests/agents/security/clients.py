"""Kafka client settings and small bounded helpers for SASL / TLS tests."""

from __future__ import annotations

import time
from collections.abc import Callable


def confluent_config(
    bootstrap: str,
    user: str | None = None,
    password: str | None = None,
    *,
    mechanism: str = "SCRAM-SHA-512",
    tls_ca: str | None = None,
    **extra,
) -> dict:
    """librdkafka settings for SASL_PLAINTEXT / SASL_SSL / SSL / PLAINTEXT."""
    config: dict = {"bootstrap.servers": bootstrap, **extra}
    if user is not None:
        config.update(
            {
                "security.protocol": "SASL_SSL" if tls_ca else "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": password,
            }
        )
    elif tls_ca:
        config["security.protocol"] = "SSL"
    if tls_ca:
        config["ssl.ca.location"] = tls_ca
    return config


def kafka_python_config(
    bootstrap: str, user: str, password: str, *, mechanism: str = "SCRAM-SHA-512"
) -> dict:
    return {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "request_timeout_ms": 10_000,
    }


def wait_for(check: Callable[[], object], timeout_s: float = 10.0, interval_s: float = 0.1):
    """Poll `check` until it returns something truthy; that value, or AssertionError."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"not true after {timeout_s}s (last: {last!r})")
