"""What the current session may do: the ACL check's question, and the authorized
operations (KIP-430) Metadata, DescribeCluster and DescribeGroups answer when asked.
Kept apart from `authorization` (the rules in front of every handler) so that handlers
can ask it without importing the rules, which import handlers."""

from __future__ import annotations

from agents.context import AgentContext
from agents.security.session import CURRENT_SESSION, Session
from core.security.acl import CLUSTER_NAME, AclOperation, Authorizer, ResourceType

OP = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
READ_ONLY_OPERATIONS = frozenset(
    {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS}
)


class Access:
    """What the current session may do (authorizer None: ACLs are off)."""

    def __init__(self, session: Session, authorizer: Authorizer | None) -> None:
        self.session = session
        self.authorizer = authorizer

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        session = self.session
        if session.read_only and operation not in READ_ONLY_OPERATIONS:
            return False
        if self.authorizer is None:
            return True
        return self.authorizer.allows(
            session.principal, session.peer_host, operation, resource_type, name
        )

    def topic(self, operation: AclOperation, name: str | None) -> bool:
        """Topic access; an unresolvable topic (None) goes to the handler, which says so."""
        return name is None or self.allows(operation, TOPIC, name)

    def cluster(self, operation: AclOperation) -> bool:
        return self.allows(operation, CLUSTER, CLUSTER_NAME)

    def any_resource(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        session = self.session
        if session.read_only and operation not in READ_ONLY_OPERATIONS:
            return False
        if self.authorizer is None:
            return True
        return self.authorizer.allows_any(
            session.principal, session.peer_host, operation, resource_type
        )


# The operations each resource type has (Kafka's AclEntry.supportedOperations), as
# answered in authorized-operations bit fields (bit n: AclOperation n).
RESOURCE_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    TOPIC: (OP.READ, OP.WRITE, OP.CREATE, OP.DELETE, OP.ALTER, OP.DESCRIBE,
            OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS),
    GROUP: (OP.READ, OP.DELETE, OP.DESCRIBE),
    CLUSTER: (OP.CREATE, OP.CLUSTER_ACTION, OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS,
              OP.IDEMPOTENT_WRITE, OP.ALTER, OP.DESCRIBE),
}  # fmt: skip


async def authorized_operations(
    ctx: AgentContext, resource_type: ResourceType, names: list[str]
) -> dict[str, int]:
    """Each named resource's authorized-operations bit field for the current session
    (KIP-430: Metadata, DescribeCluster, DescribeGroups when a client asks): every
    operation of the type when nothing restricts the session, else what its ACLs (and
    a read-only user's limits) allow."""
    supported = RESOURCE_OPERATIONS[resource_type]
    session = CURRENT_SESSION.get()
    acls_enabled = bool(ctx.cluster_config.get("acls_enabled"))
    if session is None or session.superuser or (not acls_enabled and not session.read_only):
        every = sum(1 << op for op in supported)
        return dict.fromkeys(names, every)
    authorizer = None
    if acls_enabled:
        cache = session.security.acls
        authorizer = await cache.authorizer() if cache is not None else Authorizer(())
    access = Access(session, authorizer)
    return {
        name: sum(1 << op for op in supported if access.allows(op, resource_type, name))
        for name in names
    }
