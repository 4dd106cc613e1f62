"""Kafka's ACL vocabulary and the authorizer's rules (pure: no I/O, standard library only).

An ACL binding says: `principal` from `host` is allowed (or denied) `operation` on the
resources of `resource_type` whose name matches `resource_name` under `pattern_type`.
The rules are Kafka's (AclAuthorizer / StandardAuthorizer, KIP-290):

- a DENY that matches wins over any ALLOW;
- nothing matching means denied;
- ALL matches every operation; READ, WRITE, DELETE or ALTER imply DESCRIBE, and
  ALTER_CONFIGS implies DESCRIBE_CONFIGS (allow side only);
- principal `User:*` and host `*` match anyone; a LITERAL name `*` matches every resource
  of its type; PREFIXED matches names that start with it.

The JSON names (`"topic"`, `"prefixed"`, `"read"`, `"allow"`) are the enum names in lower
case; the control plane's REST and agent APIs use them, the Kafka wire uses the numbers.
The control plane imports this module to validate and filter ACLs the way agents do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

CLUSTER_NAME = "kafka-cluster"  # the name of the one CLUSTER resource, as in Kafka
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# What a binding may hold (filters may also say ANY / MATCH).
BINDING_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
BINDING_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
BINDING_OPERATIONS = tuple(
    op for op in AclOperation if AclOperation.ALL <= op <= AclOperation.IDEMPOTENT_WRITE
)
BINDING_PERMISSIONS = (AclPermission.DENY, AclPermission.ALLOW)

# Kafka's implications (AclEntry.supportedOperations / StandardAuthorizerData).
_IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


def enum_name(value: IntEnum) -> str:
    """The JSON name of an enum member: `AclOperation.READ` → `"read"`."""
    return value.name.lower()


_Member = TypeVar("_Member", bound=IntEnum)


def parse_enum(enum: type[_Member], name: object) -> _Member:
    """The member whose JSON name is `name`; ValueError otherwise."""
    if isinstance(name, str):
        member = enum.__members__.get(name.upper())
        if member is not None and member.name != "UNKNOWN":
            return member
    raise ValueError(f"unknown {enum.__name__} {name!r}")


def principal_problem(principal: object) -> str | None:
    """Why `principal` is not a usable ACL principal (`User:<name>`), or None."""
    if not isinstance(principal, str) or not principal.startswith("User:"):
        return "principal must look like 'User:<name>' (or 'User:*' for everyone)"
    if len(principal) == len("User:") or len(principal) > 255:
        return "principal name must be 1-250 characters"
    return None


def _acl_json(acl: AclBinding | AclFilter) -> dict[str, Any]:
    """A binding's or a filter's JSON shape (the APIs'): its seven fields, enums by name."""
    return {
        "resource_type": enum_name(acl.resource_type),
        "resource_name": acl.resource_name,
        "pattern_type": enum_name(acl.pattern_type),
        "principal": acl.principal,
        "host": acl.host,
        "operation": enum_name(acl.operation),
        "permission": enum_name(acl.permission),
    }


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> AclBinding:
        """From the JSON shape of the APIs; ValueError/KeyError on a bad item."""
        return cls(
            resource_type=parse_enum(ResourceType, item["resource_type"]),
            resource_name=str(item["resource_name"]),
            pattern_type=parse_enum(PatternType, item.get("pattern_type", "literal")),
            principal=str(item["principal"]),
            host=str(item.get("host") or WILDCARD),
            operation=parse_enum(AclOperation, item["operation"]),
            permission=parse_enum(AclPermission, item.get("permission", "allow")),
        )

    def to_json(self) -> dict[str, Any]:
        return _acl_json(self)

    def problem(self) -> str | None:
        """Why this binding cannot be stored (Kafka answers INVALID_REQUEST), or None."""
        if self.resource_type not in BINDING_RESOURCE_TYPES:
            return f"resource type {enum_name(self.resource_type)} cannot carry ACLs"
        if self.pattern_type not in BINDING_PATTERN_TYPES:
            return "pattern type must be literal or prefixed"
        if self.operation not in BINDING_OPERATIONS:
            return f"operation {enum_name(self.operation)} cannot be granted"
        if self.permission not in BINDING_PERMISSIONS:
            return "permission must be allow or deny"
        if not self.resource_name or len(self.resource_name) > 255:
            return "resource name must be 1-255 characters"
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"the cluster resource is named {CLUSTER_NAME!r}"
        if self.pattern_type == PatternType.PREFIXED and self.resource_name == WILDCARD:
            return "a prefixed pattern cannot be '*' (use a literal '*')"
        if problem := principal_problem(self.principal):
            return problem
        if not self.host or len(self.host) > 255:
            return "host must be '*' or an address"
        return None

    def matches_resource(self, name: str) -> bool:
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name == name or self.resource_name == WILDCARD


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls/DeleteAcls filter: ANY / None match everything in their field."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermission = AclPermission.ANY

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> AclFilter:
        def name(key: str) -> str | None:
            value = item.get(key)
            return None if value is None else str(value)

        return cls(
            resource_type=parse_enum(ResourceType, item.get("resource_type", "any")),
            resource_name=name("resource_name"),
            pattern_type=parse_enum(PatternType, item.get("pattern_type", "any")),
            principal=name("principal"),
            host=name("host"),
            operation=parse_enum(AclOperation, item.get("operation", "any")),
            permission=parse_enum(AclPermission, item.get("permission", "any")),
        )

    def to_json(self) -> dict[str, Any]:
        return _acl_json(self)

    def matches(self, acl: AclBinding) -> bool:
        """Kafka's AclBindingFilter.matches, MATCH included (KIP-290)."""
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (AclOperation.ANY, acl.operation):
            return False
        if self.permission not in (AclPermission.ANY, acl.permission):
            return False
        if self.pattern_type == PatternType.MATCH:
            # Every binding that would apply to a resource of exactly this name.
            if self.resource_name is None:
                return True
            if acl.pattern_type == PatternType.PREFIXED:
                return self.resource_name.startswith(acl.resource_name)
            return acl.resource_name in (self.resource_name, WILDCARD)
        if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == acl.resource_name


class Authorizer:
    """Decisions over one immutable set of bindings. Build a new one when the set changes.

    `allows` memoises decisions (the set never changes under it), so the produce and
    fetch paths pay a dict lookup per topic.
    """

    def __init__(self, bindings: Iterable[AclBinding]) -> None:
        self.bindings = tuple(bindings)
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in self.bindings:
            self._by_type.setdefault(binding.resource_type, []).append(binding)
        self._memo: dict[tuple[Any, ...], bool] = {}

    def _applicable(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> list[AclBinding]:
        return [
            b
            for b in self._by_type.get(resource_type, ())
            if b.principal in (principal, WILDCARD_PRINCIPAL)
            and b.host in (host, WILDCARD)
            and b.matches_resource(name)
        ]

    def allows(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether `principal` connected from `host` may do `operation` on the resource."""
        key = (principal, host, operation, resource_type, name)
        decision = self._memo.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._memo) > 100_000:
                self._memo.clear()
            self._memo[key] = decision
        return decision

    def _decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        applicable = self._applicable(principal, host, resource_type, name)
        for b in applicable:
            if b.permission == AclPermission.DENY and b.operation in (operation, AclOperation.ALL):
                return False
        implied_by = _IMPLIED_BY.get(operation, frozenset({operation}))
        return any(
            b.permission == AclPermission.ALLOW
            and (b.operation == AclOperation.ALL or b.operation in implied_by)
            for b in applicable
        )

    def allows_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type may see `operation` (Kafka's
        authorizeByResourceType, used for idempotent producers: WRITE on any topic).
        An allow counts unless a deny of `*` or of an empty prefix covers everything."""
        mine = [
            b
            for b in self._by_type.get(resource_type, ())
            if b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD)
        ]
        for b in mine:
            if (
                b.permission == AclPermission.DENY
                and b.operation in (operation, AclOperation.ALL)
                and (
                    (b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD)
                    or (b.pattern_type == PatternType.PREFIXED and not b.resource_name)
                )
            ):
                return False
        return any(
            b.permission == AclPermission.ALLOW and b.operation in (operation, AclOperation.ALL)
            for b in mine
        )
