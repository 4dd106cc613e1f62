"""Routes a decoded request to its handler and turns the handler's answer into bytes.

A handler is `async (ctx, header, body) -> dict | None` (None: send nothing, as for
acks=0 produces). Handler bugs never reach the connection: they are logged with their
traceback and answered with UNKNOWN_SERVER_ERROR where the API has a place for an
error code, else the connection is closed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agents.context import AgentContext
from agents.control_plane import ControlPlaneError
from agents.groups.relay import handle_relayed, relaying
from agents.handlers import acls as acl_handlers
from agents.handlers import (
    cluster,
    configs,
    fetch,
    group_offsets,
    groups,
    offsets,
    produce,
    share,
    share_offsets,
    topics,
    transactions,
)
from agents.handlers.errors import CloseConnection, error_response
from agents.metrics import Counter, Histogram, error_label, request_timer
from agents.security import sasl
from agents.security.authorization import authorized_call
from agents.security.session import CURRENT_SESSION, Session
from core.kafka import SUPPORTED_VERSIONS, ApiKey, RequestHeader, encode_response
from core.kafka.codec import encode_response_parts
from core.kafka.errors import ErrorCode

log = logging.getLogger(__name__)

Handler = Callable[[AgentContext, RequestHeader, dict[str, Any]], Awaitable[dict[str, Any] | None]]


def _relayed(handler: Handler) -> Handler:
    # A zone's front for a group relays to its coordinator (agents.groups.relay).
    return relaying(handler, error_response)


# What this agent serves, and from which version (the codec may know older ones we
# do not want: Fetch < 4 has no log start offset, Produce < 3 no magic-2 batches).
# Keyed by `ApiKey`s, typed by int: they are looked up by a header's plain-int api_key
# (an IntEnum member hashes and compares as its int).
HANDLERS: dict[int, tuple[Handler, int]] = {
    ApiKey.PRODUCE: (produce.handle_produce, 3),
    ApiKey.FETCH: (fetch.handle_fetch, 4),
    ApiKey.LIST_OFFSETS: (offsets.handle_list_offsets, 1),
    ApiKey.METADATA: (cluster.handle_metadata, 0),
    ApiKey.CREATE_TOPICS: (topics.handle_create_topics, 0),
    ApiKey.DELETE_TOPICS: (topics.handle_delete_topics, 0),
    ApiKey.CREATE_PARTITIONS: (topics.handle_create_partitions, 0),
    ApiKey.DESCRIBE_CONFIGS: (configs.handle_describe_configs, 0),
    ApiKey.ALTER_CONFIGS: (configs.handle_alter_configs, 0),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (configs.handle_incremental_alter_configs, 0),
    ApiKey.INIT_PRODUCER_ID: (cluster.handle_init_producer_id, 0),
    ApiKey.DELETE_RECORDS: (offsets.handle_delete_records, 0),
    ApiKey.DESCRIBE_CLUSTER: (cluster.handle_describe_cluster, 0),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (offsets.handle_offset_for_leader_epoch, 0),
    # Consumer groups (handlers/groups.py, handlers/group_offsets.py).
    ApiKey.FIND_COORDINATOR: (groups.handle_find_coordinator, 0),
    ApiKey.JOIN_GROUP: (_relayed(groups.handle_join_group), 0),
    ApiKey.SYNC_GROUP: (_relayed(groups.handle_sync_group), 0),
    ApiKey.HEARTBEAT: (_relayed(groups.handle_heartbeat), 0),
    ApiKey.LEAVE_GROUP: (_relayed(groups.handle_leave_group), 0),
    ApiKey.DESCRIBE_GROUPS: (_relayed(groups.handle_describe_groups), 0),
    ApiKey.LIST_GROUPS: (groups.handle_list_groups, 0),
    ApiKey.DELETE_GROUPS: (_relayed(groups.handle_delete_groups), 0),
    ApiKey.OFFSET_COMMIT: (_relayed(group_offsets.handle_offset_commit), 0),
    ApiKey.OFFSET_FETCH: (_relayed(group_offsets.handle_offset_fetch), 0),
    ApiKey.OFFSET_DELETE: (_relayed(group_offsets.handle_offset_delete), 0),
    # KIP-848 (group.protocol=consumer; agents/groups/consumer.py).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (_relayed(groups.handle_consumer_group_heartbeat), 0),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (_relayed(groups.handle_consumer_group_describe), 0),
    # KIP-932 share groups (handlers/share.py): any agent serves any member.
    ApiKey.SHARE_GROUP_HEARTBEAT: (share.handle_share_group_heartbeat, 0),
    ApiKey.SHARE_GROUP_DESCRIBE: (share.handle_share_group_describe, 0),
    ApiKey.SHARE_FETCH: (share.handle_share_fetch, 0),
    ApiKey.SHARE_ACKNOWLEDGE: (share.handle_share_acknowledge, 0),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (share_offsets.handle_describe_share_group_offsets, 0),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (share_offsets.handle_alter_share_group_offsets, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (share_offsets.handle_delete_share_group_offsets, 0),
    # Transactions (handlers/transactions.py, KIP-98).
    ApiKey.ADD_PARTITIONS_TO_TXN: (transactions.handle_add_partitions_to_txn, 0),
    ApiKey.ADD_OFFSETS_TO_TXN: (transactions.handle_add_offsets_to_txn, 0),
    ApiKey.TXN_OFFSET_COMMIT: (transactions.handle_txn_offset_commit, 0),
    ApiKey.END_TXN: (transactions.handle_end_txn, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (transactions.handle_describe_transactions, 0),
    ApiKey.LIST_TRANSACTIONS: (transactions.handle_list_transactions, 0),
    # Security (agents/security): SASL, and ACLs stored by the control plane.
    ApiKey.SASL_HANDSHAKE: (sasl.handle_sasl_handshake, 0),
    ApiKey.SASL_AUTHENTICATE: (sasl.handle_sasl_authenticate, 0),
    ApiKey.CREATE_ACLS: (acl_handlers.handle_create_acls, 0),
    ApiKey.DESCRIBE_ACLS: (acl_handlers.handle_describe_acls, 0),
    ApiKey.DELETE_ACLS: (acl_handlers.handle_delete_acls, 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (
        acl_handlers.handle_describe_user_scram_credentials,
        0,
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (acl_handlers.handle_alter_user_scram_credentials, 0),
}

REQUESTS_TOTAL = Counter(
    "floe_requests_total",
    "Kafka requests answered, by API and top-level error code (its name).",
    ("api", "error"),
)
_LATENCY = Histogram(
    "floe_request_seconds",
    "Kafka request handling time, by API (a Fetch's long-poll wait left out).",
    ("api",),
)


def served_versions() -> dict[int, tuple[int, int]]:
    """API key → (min, max) version this agent serves: our handlers ∩ the codec."""
    served: dict[int, tuple[int, int]] = {}
    for api_key, (_, min_version) in HANDLERS.items():
        if api_key not in SUPPORTED_VERSIONS:
            continue
        lo, hi = SUPPORTED_VERSIONS[ApiKey(api_key)]
        if max(lo, min_version) <= hi:
            served[api_key] = (max(lo, min_version), hi)
    if ApiKey.API_VERSIONS in SUPPORTED_VERSIONS:
        served[ApiKey.API_VERSIONS] = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
    return dict(sorted(served.items()))


class Dispatcher:
    """`await dispatcher.dispatch(header, body)` → response bytes (or, for a shared Fetch
    answer, its head and body to send one after the other), or None for no response."""

    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx
        self.versions = served_versions()
        self._api_versions_body = {
            "error_code": 0,
            "api_keys": [
                {"api_key": int(k), "min_version": lo, "max_version": hi}
                for k, (lo, hi) in self.versions.items()
            ],
            "throttle_time_ms": 0,
        }

    async def relayed(self, payload: bytes, agent_id: str) -> bytes:
        """A group request relayed by the agent `agent_id` (`agents.groups.relay`)."""
        handlers = {key: handler for key, (handler, _) in HANDLERS.items()}
        return await handle_relayed(self.ctx, payload, handlers, self.serves)

    def serves(self, header: RequestHeader) -> bool:
        """Whether this agent answers this API at this version."""
        versions = self.versions.get(header.api_key)
        return versions is not None and versions[0] <= header.api_version <= versions[1]

    async def dispatch(
        self, header: RequestHeader, body: dict[str, Any], session: Session | None = None
    ) -> bytes | tuple[bytes, bytes] | None:
        """Run the handler and encode its answer. Raises `CloseConnection` only.

        `session` is the connection's security state; handlers and the ACL check find it
        as `CURRENT_SESSION` (each request runs in its own task, hence its own context).
        """
        api = _api_name(header.api_key)
        if session is not None:
            CURRENT_SESSION.set(session)
        if header.api_key == ApiKey.API_VERSIONS:
            REQUESTS_TOTAL.inc(1, api, "NONE")
            return encode_response(header, self._api_versions_body)
        if not self.serves(header):
            raise CloseConnection(f"{api} v{header.api_version} is not served by this agent")
        handler = HANDLERS[header.api_key][0]
        try:
            with request_timer(_LATENCY, api):  # a Fetch's long-poll wait left out
                response = await authorized_call(handler, self.ctx, header, body)
        except sasl.AnswerThenClose as exc:
            raise CloseConnection(str(exc), encode_response(header, exc.response)) from None
        except ControlPlaneError as exc:
            # Not a bug: the metadata store is unreachable or slow. Answer with an error
            # clients retry (UNKNOWN_SERVER_ERROR would fail a producer's messages).
            log.warning("%s v%d: control plane call failed: %s", api, header.api_version, exc)
            response = error_response(header, body, _unavailable_error(header.api_key))
            if response is None and not _is_acks_zero(header, body):
                raise CloseConnection(f"{api}: control plane unavailable") from None
        except Exception:
            log.exception(
                "%s v%d from %r (correlation id %d) failed",
                api,
                header.api_version,
                header.client_id,
                header.correlation_id,
            )
            response = error_response(header, body, ErrorCode.UNKNOWN_SERVER_ERROR)
            if response is None and not _is_acks_zero(header, body):
                raise CloseConnection(f"{api}: internal error and no error response") from None
        if response is None:
            REQUESTS_TOTAL.inc(1, api, "NONE")
            return None
        REQUESTS_TOTAL.inc(1, api, error_label(int(response.get("error_code", 0) or 0)))
        return encode_response_parts(header, response)


def _unavailable_error(api_key: int) -> ErrorCode:
    # librdkafka: KAFKA_STORAGE_ERROR on Produce is "retry, not persisted" (true: nothing
    # was appended) and on Fetch "refresh and retry"; admin and offset APIs retry on
    # REQUEST_TIMED_OUT.
    if api_key in (ApiKey.PRODUCE, ApiKey.FETCH):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.REQUEST_TIMED_OUT


def _is_acks_zero(header: RequestHeader, body: dict[str, Any]) -> bool:
    return header.api_key == ApiKey.PRODUCE and body.get("acks") == 0


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)
