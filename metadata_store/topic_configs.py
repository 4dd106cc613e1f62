"""Topic names and configs, validated the way Kafka validates them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.kafka.errors import ErrorCode
from core.topic_types import LIGHTNING, STANDARD, TOPIC_TYPE

MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 10_000
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_problem(name: str) -> str | None:
    """Why a topic name is illegal (Kafka's Topic.validate), or ``None``."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.match(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


@dataclass(frozen=True)
class ValueCheck:
    """How a config's value is checked: `check(value)` says why it is invalid (None: it
    is valid); `schema` is the same rule as an OpenAPI schema."""

    problem: Callable[[str], str | None]
    schema: dict[str, Any]

    def __call__(self, value: str) -> str | None:
        return self.problem(value)


def _long(minimum: int) -> ValueCheck:
    def check(value: str) -> str | None:
        try:
            number = int(value)
        except (TypeError, ValueError):
            return "must be an integer"
        return None if number >= minimum else f"must be at least {minimum}"

    return ValueCheck(check, {"type": "string", "pattern": _at_least_pattern(minimum)})


def _choice(*allowed: str, many: bool = False) -> ValueCheck:
    def check(value: str) -> str | None:
        parts = [p.strip() for p in str(value).split(",")] if many else [str(value)]
        bad = [p for p in parts if p not in allowed]
        return f"must be one of {', '.join(allowed)}" if bad or not parts else None

    one = "|".join(allowed)
    return ValueCheck(
        check,
        {"type": "string", "pattern": rf"^\s*({one})\s*(,\s*({one})\s*)*$"}
        if many
        else {"type": "string", "enum": list(allowed)},
    )


def _ratio_problem(value: str) -> str | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "must be a number"
    return None if 0.0 <= number <= 1.0 else "must be between 0 and 1"


_ratio = ValueCheck(
    _ratio_problem, {"type": "string", "pattern": r"^(0?\.[0-9]{1,9}|0|1|0\.0*|1\.0*)$"}
)


def _at_least_pattern(minimum: int) -> str:
    """A regular expression for the decimal integers >= ``minimum`` (< 10**18), for the
    OpenAPI schema; ``minimum`` is -1 or has at most two digits."""
    if minimum == -1:
        return r"^(-1|[0-9]{1,18})$"
    if minimum == 0:
        return r"^[0-9]{1,18}$"
    if minimum < 10:
        return rf"^([{minimum}-9]|[1-9][0-9]{{1,17}})$"
    tens, ones = divmod(minimum, 10)
    same = rf"{tens}[{ones}-9]"
    higher = rf"[{tens + 1}-9][0-9]" if tens < 9 else ""
    return rf"^({same}|{higher + '|' if higher else ''}[1-9][0-9]{{2,17}})$"


def configs_schema(*, nullable: bool = False) -> dict[str, Any]:
    """The OpenAPI schema of a topic's configs: each known name, its values as strings
    (``nullable``: or null, for "back to the default")."""
    properties = {}
    for name, definition in TOPIC_CONFIGS.items():
        schema = dict(definition.check.schema)
        if nullable:
            schema["nullable"] = True
            if "enum" in schema:
                schema["enum"] = [*schema["enum"], None]
        properties[name] = schema
    return {"type": "object", "properties": properties, "additionalProperties": False}


@dataclass(frozen=True)
class ConfigDef:
    default: str
    check: ValueCheck


_STRATEGY = "io.confluent.kafka.serializers.subject."
_TOPIC_NAME = _STRATEGY + "TopicNameStrategy"
_STRATEGIES = (
    _TOPIC_NAME,
    _STRATEGY + "RecordNameStrategy",
    _STRATEGY + "TopicRecordNameStrategy",
)
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Kafka's topic-level configs. Most only matter to Kafka's own storage engine; Floe
# accepts and reports them so tools that set them keep working. The ones Floe acts on:
# cleanup.policy, retention.ms, retention.bytes, delete.retention.ms, max.message.bytes,
# message.timestamp.type, min.compaction.lag.ms, and Confluent's confluent.*.
TOPIC_CONFIGS: dict[str, ConfigDef] = {
    "cleanup.policy": ConfigDef("delete", _choice("delete", "compact", many=True)),
    "compression.type": ConfigDef("producer", _choice(*_COMPRESSION)),
    "delete.retention.ms": ConfigDef("86400000", _long(0)),
    "file.delete.delay.ms": ConfigDef("60000", _long(0)),
    "flush.messages": ConfigDef("9223372036854775807", _long(1)),
    "flush.ms": ConfigDef("9223372036854775807", _long(0)),
    "index.interval.bytes": ConfigDef("4096", _long(0)),
    "max.compaction.lag.ms": ConfigDef("9223372036854775807", _long(1)),
    "max.message.bytes": ConfigDef("1048588", _long(0)),
    "message.timestamp.after.max.ms": ConfigDef("9223372036854775807", _long(0)),
    "message.timestamp.before.max.ms": ConfigDef("9223372036854775807", _long(0)),
    "message.timestamp.type": ConfigDef("CreateTime", _choice("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": ConfigDef("0.5", _ratio),
    "min.compaction.lag.ms": ConfigDef("0", _long(0)),
    "min.insync.replicas": ConfigDef("1", _long(1)),
    "preallocate": ConfigDef("false", _choice("true", "false")),
    "retention.bytes": ConfigDef("-1", _long(-1)),
    "retention.ms": ConfigDef("604800000", _long(-1)),
    "segment.bytes": ConfigDef("1073741824", _long(14)),
    "segment.index.bytes": ConfigDef("10485760", _long(4)),
    "segment.jitter.ms": ConfigDef("0", _long(0)),
    "segment.ms": ConfigDef("604800000", _long(1)),
    "unclean.leader.election.enable": ConfigDef("false", _choice("true", "false")),
    "message.downconversion.enable": ConfigDef("true", _choice("true", "false")),
    # Confluent's broker-side schema validation (agents/schema_registry/validation.py):
    # records' keys/values must carry the id of a schema registered under the subject
    # the strategy names.
    "confluent.key.schema.validation": ConfigDef("false", _choice("true", "false")),
    "confluent.value.schema.validation": ConfigDef("false", _choice("true", "false")),
    "confluent.key.subject.name.strategy": ConfigDef(_TOPIC_NAME, _choice(*_STRATEGIES)),
    "confluent.value.subject.name.strategy": ConfigDef(_TOPIC_NAME, _choice(*_STRATEGIES)),
    # Floe's own: a lightning topic's produce is acknowledged once its file (the journal
    # entry) is in the bucket and committed asynchronously, in order (docs/ARCHITECTURE.md
    # "Lightning topics"). Unset: the cluster's default_topic_type.
    TOPIC_TYPE: ConfigDef(STANDARD, _choice(STANDARD, LIGHTNING)),
}

# Other names a config is known by (WarpStream's), stored under Floe's name.
CONFIG_ALIASES = {"warpstream.topic.type": TOPIC_TYPE}


def canonical_config_name(name: object) -> object:
    """A config's own name for one of its aliases (``warpstream.topic.type`` →
    ``floe.topic.type``); any other name unchanged."""
    return CONFIG_ALIASES.get(name, name) if isinstance(name, str) else name


def config_problem(name: str, value: object) -> str | None:
    """Why ``name=value`` is not a valid topic config, or ``None``."""
    name = str(canonical_config_name(name))
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return f"Null value not supported for topic config {name}"
    problem = definition.check(str(value))
    return f"Invalid value {value} for configuration {name}: {problem}" if problem else None


def effective_configs(
    overrides: dict[str, Any], *, default_retention_ms: int, default_topic_type: str = STANDARD
) -> list[dict[str, Any]]:
    """Every known config of a topic with its value and whether it is a default (the
    cluster's default retention and topic type where it has them)."""
    cluster_defaults = {"retention.ms": str(default_retention_ms), TOPIC_TYPE: default_topic_type}
    result = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        default = cluster_defaults.get(name, definition.default)
        if name in overrides:
            result.append({"name": name, "value": str(overrides[name]), "is_default": False})
        else:
            result.append({"name": name, "value": default, "is_default": True})
    return result


class ConfigOpError(Exception):
    """A config operation refused, with the Kafka error code agents hand to clients."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def config_ops_apply(
    current: dict[str, Any],
    ops: list[dict[str, Any]],
    *,
    incremental: bool,
    problem: Callable[[str, object], str | None],
    list_base: Callable[[str], str | None],
) -> dict[str, str]:
    """The configs after set/delete/append/subtract ops (AlterConfigs or KIP-339's).

    Non-incremental (AlterConfigs) starts from nothing: the ``set`` ops become the whole
    set, as Kafka does. ``problem(name, value)`` says why a value is refused;
    ``list_base(name)`` is what an append/subtract starts from when the config is unset,
    or ``None`` when the config is not a list.
    """
    configs = {k: str(v) for k, v in current.items()} if incremental else {}
    for op in ops:
        name, kind, value = (
            canonical_config_name(op.get("name")),
            op.get("op", "set"),
            op.get("value"),
        )
        if not isinstance(name, str):
            raise ConfigOpError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {name}")
        if kind == "delete":
            configs.pop(name, None)
            continue
        if kind in ("append", "subtract"):
            base = list_base(name)
            if base is None:
                raise ConfigOpError(
                    ErrorCode.INVALID_CONFIG, f"Config {name} is not a list; cannot {kind}"
                )
            current_items = [p for p in configs.get(name, base).split(",") if p]
            items = [p.strip() for p in str(value or "").split(",") if p.strip()]
            if kind == "append":
                current_items += [p for p in items if p not in current_items]
            else:
                current_items = [p for p in current_items if p not in items]
            value = ",".join(current_items) or base
        elif kind != "set":
            raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {kind}")
        refused = problem(name, value)
        if refused:
            raise ConfigOpError(ErrorCode.INVALID_CONFIG, refused)
        configs[name] = str(value)
    return configs
