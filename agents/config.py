"""The agent's settings: command-line flags, each with an environment fallback.

`parse_config(argv, environ)` is pure so tests can drive it; a bad value raises
`ConfigError` with one line of text, which `__main__` prints before exiting with 2.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NoReturn
from urllib.parse import urlsplit

DEFAULT_KAFKA_PORT = 9092
DEFAULT_HTTP_PORT = 8080
DEFAULT_SCHEMA_REGISTRY_PORT = 8081  # Confluent's
DEFAULT_SCHEMA_REGISTRY_RATE = 100
DEFAULT_SCHEMA_CACHE_S = 60
DEFAULT_BATCH_TIMEOUT_MS = 250
MIN_BATCH_TIMEOUT_MS = 5
DEFAULT_BATCH_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
DEFAULT_CACHE_CHUNK_BYTES = 4 * 1024 * 1024
MIN_CACHE_CHUNK_BYTES = 64 * 1024
DEFAULT_CACHE_COPY_BYTES = 32 * 1024 * 1024
DEFAULT_PEER_TIMEOUT_MS = 5000
# What a client may name in client.id (agents.zone_routing), so every zone is nameable.
ZONE_PATTERN = r"[A-Za-z0-9._:/-]{1,64}"
# Agent roles (seed 001, "Agent Roles"): which work an agent takes. Metadata lists only
# agents that serve clients (produce or consume); `jobs` agents lease the cluster's
# background jobs (compaction, retention…) and run them against their own bucket;
# `schema-registry` agents serve Confluent's Schema Registry REST API; `pipelines`
# agents run the cluster's managed pipelines (agents/pipeline_runner.py).
ROLES = ("produce", "consume", "jobs", "schema-registry", "pipelines")
CLIENT_ROLES = frozenset({"produce", "consume"})
# Kafka's socket.request.max.bytes: the largest request frame a client may send.
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024
# Kafka's security protocols; a listener's name is one of them unless
# --listener-security-protocol-map maps it to one (Kafka's listener.security.protocol.map).
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LISTENER = re.compile(r"([A-Za-z][A-Za-z0-9_]{0,31})://(\[[0-9A-Fa-f:.]*\]|[^:/\[\]]*):(\d{1,5})")
# Agent groups (seed 002, "Agent Groups"): a client only learns its agent's group's agents.
AGENT_GROUP_PATTERN = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
DEFAULT_AGENT_GROUP = "default"


@dataclass(frozen=True)
class Listener:
    """One Kafka listener (Kafka's `listeners` entry with its `advertised.listeners` one).

    `port` 0 lets the OS choose; `advertised_port` 0 advertises the bound port. A client
    connected through a listener is only told of other agents' listeners of the same
    name and security protocol (`kind`)."""

    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int = 0

    @property
    def kind(self) -> tuple[str, str]:
        return (self.name, self.protocol)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")


@dataclass
class LearnedClusterSettings:
    """Cluster settings the agent learns from the control plane, kept through an outage."""

    ripcord: bool = False


class ConfigError(Exception):
    """A flag or environment variable has a bad value; the message is one line."""


@dataclass(frozen=True)
class AgentConfig:
    """Everything the agent process is told at start; see `_build_parser` for meanings."""

    control_plane_url: str
    agent_key: str
    bucket_url: str
    agent_id: str
    host: str = "127.0.0.1"
    advertise_host: str = "127.0.0.1"
    kafka_port: int = DEFAULT_KAFKA_PORT
    http_port: int = DEFAULT_HTTP_PORT
    schema_registry_port: int = DEFAULT_SCHEMA_REGISTRY_PORT
    schema_registry_rate: int = DEFAULT_SCHEMA_REGISTRY_RATE  # registrations/s per caller
    schema_cache_s: int = DEFAULT_SCHEMA_CACHE_S  # how long a cached schema id is trusted
    zone: str = ""
    batch_timeout_ms: int = DEFAULT_BATCH_TIMEOUT_MS
    batch_max_bytes: int = DEFAULT_BATCH_MAX_BYTES
    cache_bytes: int = DEFAULT_CACHE_BYTES
    cache_chunk_bytes: int = DEFAULT_CACHE_CHUNK_BYTES  # one GET, one unit of the zone cache
    cache_copy_bytes: int = DEFAULT_CACHE_COPY_BYTES  # local copies of chunks peers own
    zone_cache: bool = True  # share chunks with the zone's agents (off: each GETs its own)
    peer_timeout_ms: int = DEFAULT_PEER_TIMEOUT_MS
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    log_level: str = "INFO"
    require_sasl: bool = False  # refuse every request but ApiVersions/SASL until logged in
    tls_cert: str | None = None  # PEM certificate (chain) of the Kafka listener
    tls_key: str | None = None
    tls_client_ca: str | None = None  # mutual TLS: client certificates signed by this CA
    roles: tuple[str, ...] = ROLES
    spark_master: str = ""  # jobs role: where Spark runs ("" = SPARK_MASTER or local[*])
    job_lease_s: int = 120  # jobs role: a lease lasts this long unless renewed
    # jobs role: a migration's lease lasts this long unless renewed (every 2 s)
    migration_lease_s: int = 30
    ripcord_flag: bool = False  # --ripcord: on for this agent whatever the cluster says
    # Every Kafka listener, the first the primary (its address is the agent's address in
    # the ready line and the control plane's host/port). Empty: the single-port flags'
    # one listener (`kafka_listeners`).
    listeners: tuple[Listener, ...] = ()
    agent_group: str = DEFAULT_AGENT_GROUP
    # What the control plane last said of the cluster (the runtime updates it on every
    # register/heartbeat answer): the frozen config's one mutable part.
    learned: LearnedClusterSettings = field(
        default_factory=LearnedClusterSettings, compare=False, repr=False
    )

    @property
    def ripcord(self) -> bool:
        """Ripcord's effective value: the agent's flag OR the cluster setting last learned."""
        return self.ripcord_flag or self.learned.ripcord

    @property
    def kafka_listeners(self) -> tuple[Listener, ...]:
        """The listeners to serve: `--listener`'s, or the single-port flags' one (SASL when
        --require-sasl, TLS when --tls-cert)."""
        if self.listeners:
            return self.listeners
        protocol = ("SASL_" if self.require_sasl else "") + (
            "SSL" if self.tls_cert else "PLAINTEXT"
        )
        return (Listener(protocol, protocol, self.host, self.kafka_port, self.advertise_host),)


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus the error on two lines; we want exactly one."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _positive_int(minimum: int) -> Callable[[str], int]:

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _roles(text: str) -> tuple[str, ...]:
    names = [r.strip().lower() for r in text.split(",") if r.strip()]
    unknown = sorted(set(names) - set(ROLES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"roles are a comma-separated list of {', '.join(ROLES)}, got {text!r}"
        )
    return tuple(r for r in ROLES if r in names)


def _port(text: str) -> int:
    value = _positive_int(0)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {value}")
    return value


def _build_parser() -> _OneLineParser:
    parser = _OneLineParser(
        prog="floe-agent",
        description="Floe agent: a stateless Kafka-protocol server writing to object storage.",
    )
    add = parser.add_argument
    add("--control-plane-url", help="control plane base URL [FLOE_CONTROL_PLANE_URL]")
    add("--agent-key", help="agent key of the virtual cluster [FLOE_AGENT_KEY]")
    add("--bucket-url", help="file:///dir, s3://bucket?... or mem://name [FLOE_BUCKET_URL]")
    add("--agent-id", help="stable agent id (default: random agt-…) [FLOE_AGENT_ID]")
    add("--host", help="address to bind (default 127.0.0.1) [FLOE_HOST]")
    add("--advertise-host", help="host clients should connect to [FLOE_ADVERTISE_HOST]")
    add("--kafka-port", type=_port, help="Kafka port (default 9092) [FLOE_KAFKA_PORT]")
    add("--http-port", type=_port, help="/healthz and /metrics port (8080) [FLOE_HTTP_PORT]")
    add(
        "--schema-registry-port",
        type=_port,
        help="schema-registry role: the REST API's port (default 8081) [FLOE_SCHEMA_REGISTRY_PORT]",
    )
    add(
        "--schema-registry-rate",
        type=_positive_int(1),
        help="schema-registry role: registrations a second per caller (a SASL user, else an "
        "address; bursts of twice that) (default 100) [FLOE_SCHEMA_REGISTRY_RATE]",
    )
    add(
        "--schema-cache",
        type=_positive_int(1),
        help="seconds a schema id this agent cached (and which subjects use it, for "
        "validation at produce) is trusted before it asks again: how soon a permanent "
        "delete on another agent is seen here (default 60) [FLOE_SCHEMA_CACHE]",
    )
    add("--zone", help="availability zone of this agent [FLOE_ZONE]")
    add(
        "--agent-group",
        help="agent group: clients of this agent only learn the agents of its group "
        "(lowercase letters, digits, dashes; default 'default') [FLOE_AGENT_GROUP]",
    )
    add(
        "--listener",
        action="append",
        help="a Kafka listener NAME://host:port, repeatable, NAME a security protocol "
        "(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or mapped to one; instead of "
        "--kafka-port and --require-sasl [FLOE_LISTENERS, comma-separated]",
    )
    add(
        "--advertised-listener",
        action="append",
        help="NAME://host:port clients are told for listener NAME (default: "
        "--advertise-host and the bound port) [FLOE_ADVERTISED_LISTENERS]",
    )
    add(
        "--listener-security-protocol-map",
        help="NAME:PROTOCOL,… for listener names that are not a security protocol "
        "[FLOE_LISTENER_SECURITY_PROTOCOL_MAP]",
    )
    add(
        "--batch-timeout",
        type=_positive_int(MIN_BATCH_TIMEOUT_MS),
        help="flush a segment after this many ms (default 250, min 5) [FLOE_BATCH_TIMEOUT]",
    )
    add(
        "--batch-max-bytes",
        type=_positive_int(1024),
        help="flush a segment at this size (default 8 MiB) [FLOE_BATCH_MAX_BYTES]",
    )
    add(
        "--cache-bytes",
        type=_positive_int(0),
        help="read cache size in bytes (default 256 MiB) [FLOE_CACHE_BYTES]",
    )
    add(
        "--cache-chunk-bytes",
        type=_positive_int(MIN_CACHE_CHUNK_BYTES),
        help="bytes per ranged GET and per cached chunk (default 4 MiB) [FLOE_CACHE_CHUNK_BYTES]",
    )
    add(
        "--cache-copy-bytes",
        type=_positive_int(0),
        help="memory for copies of chunks other agents of the zone own (default 32 MiB) "
        "[FLOE_CACHE_COPY_BYTES]",
    )
    add(
        "--zone-cache",
        type=_boolean,
        help="share one cache with the zone's agents (default true) [FLOE_ZONE_CACHE]",
    )
    add(
        "--peer-timeout-ms",
        type=_positive_int(50),
        help="give up on a peer's chunk after this long and read the bucket (default 5000) "
        "[FLOE_PEER_TIMEOUT_MS]",
    )
    add("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="[FLOE_LOG_LEVEL]")
    add(
        "--require-sasl",
        action="store_true",
        default=None,
        help="clients must log in with SASL PLAIN or SCRAM first [FLOE_REQUIRE_SASL]",
    )
    add("--tls-cert", help="PEM certificate: serve Kafka over TLS [FLOE_TLS_CERT]")
    add("--tls-key", help="PEM private key of --tls-cert [FLOE_TLS_KEY]")
    add(
        "--tls-client-ca",
        help="PEM CA: require client certificates (mTLS) [FLOE_TLS_CLIENT_CA]",
    )
    add(
        "--roles",
        type=_roles,
        help="comma-separated: produce, consume, jobs, schema-registry, pipelines (default all) "
        "[FLOE_ROLES]",
    )
    add("--spark-master", help="jobs role: Spark master (default local[*]) [SPARK_MASTER]")
    add(
        "--job-lease-s",
        type=_positive_int(10),
        help="jobs role: lease length, renewed while a job runs (default 120) [FLOE_JOB_LEASE_S]",
    )
    add(
        "--migration-lease-s",
        type=_positive_int(10),
        help="jobs role: a migration copier's lease length, renewed every 2 s (default 30)"
        " [FLOE_MIGRATION_LEASE_S]",
    )
    add(
        "--ripcord",
        action="store_true",
        default=None,
        help="keep serving clients while the control plane is unreachable: acknowledge "
        "produce once journaled in the bucket, commit when it is back (also a cluster "
        "setting; either turns it on) [FLOE_RIPCORD]",
    )
    return parser


# flag destination -> (environment variable, parser for the environment's text)
_ENV: dict[str, tuple[str, Callable[[str], object]]] = {
    "control_plane_url": ("FLOE_CONTROL_PLANE_URL", str),
    "agent_key": ("FLOE_AGENT_KEY", str),
    "bucket_url": ("FLOE_BUCKET_URL", str),
    "agent_id": ("FLOE_AGENT_ID", str),
    "host": ("FLOE_HOST", str),
    "advertise_host": ("FLOE_ADVERTISE_HOST", str),
    "kafka_port": ("FLOE_KAFKA_PORT", _port),
    "http_port": ("FLOE_HTTP_PORT", _port),
    "schema_registry_port": ("FLOE_SCHEMA_REGISTRY_PORT", _port),
    "schema_registry_rate": ("FLOE_SCHEMA_REGISTRY_RATE", _positive_int(1)),
    "schema_cache": ("FLOE_SCHEMA_CACHE", _positive_int(1)),
    "zone": ("FLOE_ZONE", str),
    "agent_group": ("FLOE_AGENT_GROUP", str),
    "listener": ("FLOE_LISTENERS", lambda text: [t.strip() for t in text.split(",") if t.strip()]),
    "advertised_listener": (
        "FLOE_ADVERTISED_LISTENERS",
        lambda text: [t.strip() for t in text.split(",") if t.strip()],
    ),
    "listener_security_protocol_map": ("FLOE_LISTENER_SECURITY_PROTOCOL_MAP", str),
    "batch_timeout": ("FLOE_BATCH_TIMEOUT", _positive_int(MIN_BATCH_TIMEOUT_MS)),
    "batch_max_bytes": ("FLOE_BATCH_MAX_BYTES", _positive_int(1024)),
    "cache_bytes": ("FLOE_CACHE_BYTES", _positive_int(0)),
    "cache_chunk_bytes": ("FLOE_CACHE_CHUNK_BYTES", _positive_int(MIN_CACHE_CHUNK_BYTES)),
    "cache_copy_bytes": ("FLOE_CACHE_COPY_BYTES", _positive_int(0)),
    "zone_cache": ("FLOE_ZONE_CACHE", _boolean),
    "peer_timeout_ms": ("FLOE_PEER_TIMEOUT_MS", _positive_int(50)),
    "log_level": ("FLOE_LOG_LEVEL", str.upper),
    "require_sasl": ("FLOE_REQUIRE_SASL", _boolean),
    "tls_cert": ("FLOE_TLS_CERT", str),
    "tls_key": ("FLOE_TLS_KEY", str),
    "tls_client_ca": ("FLOE_TLS_CLIENT_CA", str),
    "roles": ("FLOE_ROLES", _roles),
    "spark_master": ("SPARK_MASTER", str),
    "job_lease_s": ("FLOE_JOB_LEASE_S", _positive_int(10)),
    "migration_lease_s": ("FLOE_MIGRATION_LEASE_S", _positive_int(10)),
    "ripcord": ("FLOE_RIPCORD", _boolean),
}


def _int_value(values: Mapping[str, object], dest: str, default: int) -> int:
    """An integer option as its parser (`_port`, `_positive_int`, whose minimums are what
    may be given) returned it, or `default` when neither flag nor environment gave one."""
    value = values[dest]
    if value is None:
        return default
    if not isinstance(value, int):
        raise TypeError(f"{dest} parsed to {value!r}, not an int")
    return value


def parse_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> AgentConfig:
    """Flags first, then `FLOE_*` environment variables, then defaults."""
    environ = os.environ if environ is None else environ
    args = _build_parser().parse_args(argv)
    values: dict[str, object] = {}
    for dest, (env_name, parse) in _ENV.items():
        value = getattr(args, dest)
        if value is None and environ.get(env_name):
            try:
                value = parse(environ[env_name])
            except (argparse.ArgumentTypeError, ValueError) as exc:
                raise ConfigError(f"{env_name}: {exc}") from None
        values[dest] = value

    for dest, flag in (
        ("control_plane_url", "--control-plane-url"),
        ("agent_key", "--agent-key"),
        ("bucket_url", "--bucket-url"),
    ):
        if not values[dest]:
            env_name = _ENV[dest][0]
            raise ConfigError(f"{flag} (or {env_name}) is required")

    url = str(values["control_plane_url"]).rstrip("/")
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise ConfigError(f"--control-plane-url must be an http(s) URL, got {url!r}")
    bucket = str(values["bucket_url"])
    if urlsplit(bucket).scheme not in ("file", "mem", "s3"):
        raise ConfigError(f"--bucket-url must be file://, mem:// or s3://, got {bucket!r}")
    if values["log_level"] not in (None, "DEBUG", "INFO", "WARNING", "ERROR"):
        raise ConfigError(f"FLOE_LOG_LEVEL: unknown level {values['log_level']!r}")

    if bool(values["tls_cert"]) != bool(values["tls_key"]):
        raise ConfigError("--tls-cert and --tls-key go together")
    if values["tls_client_ca"] and not values["tls_cert"]:
        raise ConfigError("--tls-client-ca needs --tls-cert and --tls-key")

    agent_id = str(values["agent_id"] or f"agt-{secrets.token_hex(6)}")
    # The id is part of object keys and metric labels: keep it to safe characters.
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", agent_id):
        raise ConfigError(
            f"--agent-id must be 1-64 letters, digits, '.', '_' or '-', got {agent_id!r}"
        )

    zone = str(values["zone"] or "")
    if zone and not re.fullmatch(ZONE_PATTERN, zone):
        raise ConfigError(
            f"--zone must be 1-64 letters, digits, '.', '_', ':', '/' or '-', got {zone!r}"
        )

    agent_group = str(values["agent_group"] or DEFAULT_AGENT_GROUP)
    if not re.fullmatch(AGENT_GROUP_PATTERN, agent_group):
        raise ConfigError(
            "--agent-group must be 1-63 lowercase letters, digits or '-' (not first or "
            f"last), got {agent_group!r}"
        )

    roles = values["roles"] or ROLES
    if not isinstance(roles, tuple):
        raise TypeError(f"roles parsed to {roles!r}, not a tuple")

    host = values["host"] or "127.0.0.1"
    advertise = values["advertise_host"] or (host if host not in ("0.0.0.0", "::") else "127.0.0.1")
    listeners = _listeners(values, host=str(host), advertise=str(advertise))
    return AgentConfig(
        control_plane_url=url,
        agent_key=str(values["agent_key"]),
        bucket_url=bucket,
        agent_id=agent_id,
        host=str(host),
        advertise_host=str(advertise),
        kafka_port=_int_value(values, "kafka_port", DEFAULT_KAFKA_PORT),
        http_port=_int_value(values, "http_port", DEFAULT_HTTP_PORT),
        schema_registry_port=_int_value(
            values, "schema_registry_port", DEFAULT_SCHEMA_REGISTRY_PORT
        ),
        schema_registry_rate=_int_value(
            values, "schema_registry_rate", DEFAULT_SCHEMA_REGISTRY_RATE
        ),
        schema_cache_s=_int_value(values, "schema_cache", DEFAULT_SCHEMA_CACHE_S),
        zone=zone,
        batch_timeout_ms=_int_value(values, "batch_timeout", DEFAULT_BATCH_TIMEOUT_MS),
        batch_max_bytes=_int_value(values, "batch_max_bytes", DEFAULT_BATCH_MAX_BYTES),
        cache_bytes=_int_value(values, "cache_bytes", DEFAULT_CACHE_BYTES),
        cache_chunk_bytes=_int_value(values, "cache_chunk_bytes", DEFAULT_CACHE_CHUNK_BYTES),
        cache_copy_bytes=_int_value(values, "cache_copy_bytes", DEFAULT_CACHE_COPY_BYTES),
        zone_cache=values["zone_cache"] is not False,
        peer_timeout_ms=_int_value(values, "peer_timeout_ms", DEFAULT_PEER_TIMEOUT_MS),
        log_level=str(values["log_level"] or "INFO"),
        # With --listener: whether any listener takes SASL (the Schema Registry asks).
        require_sasl=bool(values["require_sasl"]) or any(x.sasl for x in listeners),
        tls_cert=str(values["tls_cert"]) if values["tls_cert"] else None,
        tls_key=str(values["tls_key"]) if values["tls_key"] else None,
        tls_client_ca=str(values["tls_client_ca"]) if values["tls_client_ca"] else None,
        roles=roles,
        spark_master=str(values["spark_master"] or ""),
        job_lease_s=_int_value(values, "job_lease_s", 120),
        migration_lease_s=_int_value(values, "migration_lease_s", 30),
        ripcord_flag=bool(values["ripcord"]),
        listeners=listeners,
        agent_group=agent_group,
    )


def _listener_parts(text: str, flag: str) -> tuple[str, str, int]:
    found = _LISTENER.fullmatch(text.strip())
    if found is None:
        raise ConfigError(f"{flag} must be NAME://host:port, got {text!r}")
    port = int(found.group(3))
    if port > 65535:
        raise ConfigError(f"{flag}: not a TCP port: {port}")
    return found.group(1).upper(), found.group(2).strip("[]"), port


def _protocol_map(text: str) -> dict[str, str]:
    mapped = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, _, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not name.strip() or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                "--listener-security-protocol-map takes NAME:PROTOCOL,… with PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOLS)}, got {item!r}"
            )
        mapped[name.strip().upper()] = protocol
    return mapped


def _listeners(values: Mapping[str, object], *, host: str, advertise: str) -> tuple[Listener, ...]:
    """`--listener`s with their advertised addresses, checked; () without --listener."""
    given = values["listener"] or []
    advertised = values["advertised_listener"] or []
    if not isinstance(given, list) or not isinstance(advertised, list):
        raise TypeError("listeners parsed to something other than lists")
    if not given:
        if advertised:
            raise ConfigError("--advertised-listener needs --listener")
        return ()
    if values["kafka_port"] is not None:
        raise ConfigError("--kafka-port and --listener are alternatives: give one")
    if values["require_sasl"]:
        raise ConfigError(
            "--require-sasl is for the single --kafka-port listener: name a SASL_PLAINTEXT "
            "or SASL_SSL listener instead"
        )
    mapped = _protocol_map(str(values["listener_security_protocol_map"] or ""))
    listeners: dict[str, Listener] = {}
    for text in given:
        name, bind_host, port = _listener_parts(text, "--listener")
        protocol = mapped.get(name) or (name if name in SECURITY_PROTOCOLS else "")
        if not protocol:
            raise ConfigError(
                f"listener {name}: name a security protocol ({', '.join(SECURITY_PROTOCOLS)}) "
                f"or map it with --listener-security-protocol-map {name}:PROTOCOL"
            )
        if name in listeners:
            raise ConfigError(f"listener {name} is given twice")
        bind_host = bind_host or host
        listeners[name] = Listener(name, protocol, bind_host, port, advertise)
    for text in advertised:
        name, adv_host, port = _listener_parts(text, "--advertised-listener")
        if name not in listeners:
            raise ConfigError(f"--advertised-listener {name}: no --listener of that name")
        listeners[name] = replace(
            listeners[name], advertised_host=adv_host or advertise, advertised_port=port
        )
    if any(x.tls for x in listeners.values()) and not values["tls_cert"]:
        raise ConfigError("an SSL or SASL_SSL listener needs --tls-cert and --tls-key")
    if values["tls_cert"] and not any(x.tls for x in listeners.values()):
        raise ConfigError("--tls-cert is given but no listener is SSL or SASL_SSL")
    return tuple(listeners.values())
