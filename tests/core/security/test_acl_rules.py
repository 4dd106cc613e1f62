"""The authorizer's rules and the ACL filters, as Kafka defines them (pure functions)."""

from __future__ import annotations

import pytest

from core.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    Authorizer,
    PatternType,
    ResourceType,
)

OP, RT, PT, PERM = AclOperation, ResourceType, PatternType, AclPermission


def acl(principal="User:alice", op=OP.READ, name="orders", pattern=PT.LITERAL, **kw):
    return AclBinding(
        kw.get("rtype", RT.TOPIC),
        name,
        pattern,
        principal,
        kw.get("host", "*"),
        op,
        kw.get("permission", PERM.ALLOW),
    )


def allowed(bindings, op=OP.READ, name="orders", principal="User:alice", rtype=RT.TOPIC):
    return Authorizer(bindings).allows(principal, "10.1.1.1", op, rtype, name)


def test_nothing_matching_means_denied():
    assert not allowed([])
    assert not allowed([acl(name="other")])
    assert not allowed([acl(principal="User:bob")])
    assert not allowed([acl(op=OP.WRITE)])
    assert not allowed([acl(rtype=RT.GROUP)])


def test_literal_prefixed_and_wildcard_names_match():
    assert allowed([acl()])
    assert allowed([acl(name="*")])
    assert allowed([acl(name="ord", pattern=PT.PREFIXED)])
    assert not allowed([acl(name="orders-eu", pattern=PT.PREFIXED)])
    assert not allowed([acl(name="ord")])  # a literal is not a prefix


def test_wildcard_principal_and_hosts():
    assert allowed([acl(principal="User:*")])
    assert allowed([acl(host="10.1.1.1")])
    assert not allowed([acl(host="10.1.1.2")])


def test_deny_wins_over_allow():
    assert not allowed([acl(name="*"), acl(permission=PERM.DENY)])
    assert not allowed([acl(), acl(principal="User:*", op=OP.ALL, permission=PERM.DENY)])
    assert not allowed([acl(), acl(name="o", pattern=PT.PREFIXED, permission=PERM.DENY)])
    # A deny of another operation does not deny this one.
    assert allowed([acl(), acl(op=OP.WRITE, permission=PERM.DENY)])


@pytest.mark.parametrize("granted", [OP.READ, OP.WRITE, OP.DELETE, OP.ALTER, OP.ALL])
def test_describe_is_implied_by_stronger_operations(granted):
    assert allowed([acl(op=granted)], op=OP.DESCRIBE)


def test_describe_configs_is_implied_by_alter_configs_only():
    assert allowed([acl(op=OP.ALTER_CONFIGS)], op=OP.DESCRIBE_CONFIGS)
    assert not allowed([acl(op=OP.READ)], op=OP.DESCRIBE_CONFIGS)
    # Implication is for allows only: denying READ does not deny DESCRIBE.
    assert allowed([acl(op=OP.DESCRIBE), acl(permission=PERM.DENY)], op=OP.DESCRIBE)


def test_allows_any_finds_some_writable_topic():
    authorizer = Authorizer([acl(op=OP.WRITE, name="logs-", pattern=PT.PREFIXED)])
    assert authorizer.allows_any("User:alice", "h", OP.WRITE, RT.TOPIC)
    assert not authorizer.allows_any("User:bob", "h", OP.WRITE, RT.TOPIC)
    denied = Authorizer([acl(op=OP.WRITE), acl(name="*", op=OP.ALL, permission=PERM.DENY)])
    assert not denied.allows_any("User:alice", "h", OP.WRITE, RT.TOPIC)


def test_filters_match_as_kafka_describes():
    bindings = [
        acl(),
        acl(name="ord", pattern=PT.PREFIXED),
        acl(name="*"),
        acl(name="other"),
        acl(principal="User:bob", op=OP.WRITE, permission=PERM.DENY),
    ]

    def matching(**kw):
        return [b for b in bindings if AclFilter(**kw).matches(b)]

    assert matching() == bindings
    assert matching(resource_name="orders", pattern_type=PT.LITERAL) == [bindings[0], bindings[4]]
    assert matching(resource_name="orders", pattern_type=PT.MATCH) == bindings[0:3] + [bindings[4]]
    assert matching(principal="User:bob") == [bindings[4]]
    assert matching(permission=PERM.DENY, operation=OP.WRITE) == [bindings[4]]


def test_bindings_round_trip_through_json_and_refuse_nonsense():
    binding = acl(name="ord", pattern=PT.PREFIXED, op=OP.IDEMPOTENT_WRITE)
    assert AclBinding.from_json(binding.to_json()) == binding
    assert binding.problem() is None
    for bad in (
        acl(principal="alice"),
        acl(name=""),
        acl(rtype=RT.ANY),
        acl(op=OP.ANY),
        acl(pattern=PT.MATCH),
        acl(rtype=RT.CLUSTER, name="other"),
        acl(name="*", pattern=PT.PREFIXED),
    ):
        assert bad.problem(), bad
    with pytest.raises(ValueError):
        AclBinding.from_json({**binding.to_json(), "operation": "fly"})
