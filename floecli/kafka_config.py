"""The librdkafka configuration every Kafka subcommand shares: bootstrap, SASL/TLS and
`-X key=value` pass-through, and the bound on every call."""

from __future__ import annotations

import argparse
from typing import Any

from floecli.errors import BadInput, CommandFailed

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def add_connection_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--bootstrap-server",
        "-b",
        required=required,
        metavar="HOST:PORT",
        help="an agent's Kafka address (comma-separated for several)",
    )
    group.add_argument("--sasl-mechanism", choices=SASL_MECHANISMS, help="SASL mechanism")
    group.add_argument("--sasl-username", help="SASL user name")
    group.add_argument("--sasl-password", help="SASL password")
    group.add_argument("--tls", action="store_true", help="connect with TLS (SASL_SSL / SSL)")
    group.add_argument("--tls-ca", metavar="FILE", help="CA certificate file for TLS")
    group.add_argument(
        "-X",
        dest="extra",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other librdkafka property (repeatable)",
    )
    group.add_argument(
        "--request-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="bound on each network wait (default 10)",
    )


def client_config(args: argparse.Namespace, **more: Any) -> dict[str, Any]:
    """librdkafka properties from the parsed arguments (BadInput on a malformed one)."""
    if args.request_timeout <= 0:
        raise BadInput("--request-timeout must be positive")
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap_server,
        "socket.timeout.ms": int(args.request_timeout * 1000),
        "socket.connection.setup.timeout.ms": int(args.request_timeout * 1000),
        "error_cb": _fail_on_fatal,
        # librdkafka's own log lines (every failed connect) would bury the one-line
        # error; `-X log_level=7` brings them back.
        "log_level": 0,
    }
    if args.sasl_mechanism:
        if not (args.sasl_username and args.sasl_password):
            raise BadInput("--sasl-mechanism needs --sasl-username and --sasl-password")
        config.update(
            {
                "security.protocol": "SASL_SSL" if args.tls else "SASL_PLAINTEXT",
                "sasl.mechanism": args.sasl_mechanism,
                "sasl.username": args.sasl_username,
                "sasl.password": args.sasl_password,
            }
        )
    elif args.tls:
        config["security.protocol"] = "SSL"
    if args.tls_ca:
        config["ssl.ca.location"] = args.tls_ca
    for item in args.extra:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"-X wants KEY=VALUE, got {item!r}")
        config[key] = value
    config.update(more)
    return config


def _fail_on_fatal(error: Any) -> None:
    # Authentication failures and fatal errors end the command; transient ones
    # (a broker briefly down) are librdkafka's to retry within the bound.
    from confluent_kafka import KafkaError

    if error.fatal() or error.code() == KafkaError._AUTHENTICATION:
        raise CommandFailed(error.str())


def reachable(config: dict[str, Any], timeout_s: float) -> None:
    """Fail fast (CommandFailed) when no broker answers a metadata request in time."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({k: v for k, v in config.items() if k != "error_cb"})
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise CommandFailed(
            f"no Kafka broker answered at {config['bootstrap.servers']} "
            f"within {timeout_s:g}s ({exc.args[0].str() if exc.args else exc})"
        ) from None
