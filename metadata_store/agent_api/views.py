"""The agent API's calls on the metadata store (contract: docs/AGENT_API.md): register
and heartbeat, commit, fetch plans, offsets, producer ids, topics, group offsets.

Plain Django views rather than DRF: these are the hottest endpoints in the system and
carry no browsable or schema needs (``endpoint`` authenticates and validates).
"""

from __future__ import annotations

import asyncio

import msgspec
import psycopg
from django.core.exceptions import ValidationError

from metadata_store import mirroring, store, transactions
from metadata_store.agent_api import feed_relay, schemas
from metadata_store.agent_api.endpoint import (
    KEY_AGENT_GROUP,
    Answer,
    CallRefused,
    endpoint,
    failure,
    retriable,
)
from metadata_store.agent_api.schemas import as_dict, as_dicts
from metadata_store.agent_api.topics import (
    topics_alter_configs,
    topics_create,
    topics_create_partitions,
    topics_delete,
    topics_describe_configs,
    topics_list,
)
from metadata_store.broker_configs import broker_configs_alter, broker_configs_describe
from metadata_store.clusters import BucketMismatch, VirtualCluster, cluster_bucket_claim
from metadata_store.group_leases import group_leases_exchange, group_state_save
from metadata_store.group_offsets import group_offsets_commit, group_offsets_fetch
from metadata_store.journals import journal_lease_hold, journal_status
from metadata_store.leases import LeaseLost
from metadata_store.live_agents import AgentBeat, agents_heartbeat
from metadata_store.models import Agent
from metadata_store.share_groups import (
    share_configs_alter,
    share_configs_describe,
    share_fetch,
    share_groups_delete,
    share_groups_list,
    share_heartbeat,
)
from metadata_store.share_offsets import (
    share_offsets_alter,
    share_offsets_delete,
    share_offsets_describe,
)


def _beat(body: schemas.HeartbeatRequest) -> AgentBeat:
    """The wire body as the store's value (the store does not know the wire format)."""
    return AgentBeat(
        agent_id=body.agent_id,
        host=body.host,
        port=body.port,
        listeners=[msgspec.to_builtins(x) for x in body.listeners],
        agent_group=body.agent_group,
        zone=body.zone,
        load=body.load,
        http_port=body.http_port,
        schema_registry_port=body.schema_registry_port,
        version=body.version,
        roles=list(body.roles),
        stats=None if body.stats is None else msgspec.to_builtins(body.stats),
    )


def _agent_group_allowed(body: schemas.HeartbeatRequest) -> None:
    """403 for an agent whose group is not the one its agent key is limited to."""
    limit = KEY_AGENT_GROUP.get()
    if limit and body.agent_group != limit:
        raise CallRefused(
            403,
            f"this agent key is limited to agent group {limit!r}; "
            f"the agent is in {body.agent_group!r}",
        )


@endpoint(schemas.HeartbeatRequest)
def register(cluster: VirtualCluster, body: schemas.HeartbeatRequest) -> Answer:
    """A heartbeat that first checks the agent's bucket against the cluster's (the first
    agent fixes it): 409 naming both when they differ."""
    _agent_group_allowed(body)
    if body.bucket_url:
        try:
            cluster_bucket_claim(cluster=cluster, bucket_url=body.bucket_url)
        except BucketMismatch as exc:
            raise CallRefused(409, str(exc)) from None
        except ValidationError as exc:
            raise CallRefused(400, f"bad request: bucket_url: {exc.messages[0]}") from None
    return agents_heartbeat(cluster, _beat(body))


@endpoint(schemas.HeartbeatRequest)
def heartbeat(cluster: VirtualCluster, body: schemas.HeartbeatRequest) -> Answer:
    _agent_group_allowed(body)
    return agents_heartbeat(cluster, _beat(body))


@endpoint(schemas.CommitRequest)
def commit(cluster: VirtualCluster, body: schemas.CommitRequest) -> Answer:
    schemas.validate_commit(body, cluster_prefix=cluster.public_id + "/")
    try:
        results = store.file_commit(
            cluster_id=cluster.pk, file_key=body.file_key, size=body.size, batches=body.batches
        )
    except psycopg.errors.CheckViolation as exc:
        if not mirroring.refused_as_mirrored(exc):
            raise
        results = mirroring.mirrored_refusal(len(body.batches))
    return {"batches": results}


@endpoint(schemas.CommitFilesRequest)
def commit_files(cluster: VirtualCluster, body: schemas.CommitFilesRequest) -> Answer:
    """Several files of one journal, in order, in one statement (docs/AGENT_API.md
    "commit-files"). When that statement fails, each file is committed alone, in order,
    and answered alone; the metadata store busy or out of reach fails the whole call."""
    schemas.validate_commit_files(body, cluster_prefix=cluster.public_id + "/")
    try:
        answers = store.files_commit(cluster_id=cluster.pk, files=body.files)
        return {"files": [{"batches": a} for a in answers]}
    except Exception as exc:
        if retriable(exc):
            raise
    return {"files": [_file_answer(cluster, file) for file in body.files]}


def _file_answer(cluster: VirtualCluster, file: schemas.CommitRequest) -> Answer:
    """One file of a `commit-files` call committed alone: its answer, or its refusal
    (`{"error", "status"}`) as a `commit` of it alone would be answered."""
    try:
        return commit.handler(cluster, file)
    except Exception as exc:
        if retriable(exc):
            raise
        status, answer = failure("commit-files", exc)
        return {**answer, "status": status}


@endpoint(schemas.MirrorCommitRequest)
def mirror_commit(cluster: VirtualCluster, body: schemas.MirrorCommitRequest) -> Answer:
    schemas.validate_mirror_commit(body, cluster_prefix=cluster.public_id + "/")
    try:
        return mirroring.mirrored_file_commit(
            cluster_id=cluster.pk,
            migration_id=body.migration_id,
            lease=body.lease,
            file_key=body.file_key,
            size=body.size,
            batches=[mirroring.MirroredBatch(**msgspec.structs.asdict(b)) for b in body.batches],
            log_starts=[mirroring.LogStart(**msgspec.structs.asdict(s)) for s in body.log_starts],
            markers=[mirroring.MirroredMarker(**msgspec.structs.asdict(m)) for m in body.markers],
        )
    except LeaseLost as exc:
        raise CallRefused(409, str(exc)) from None


@endpoint(schemas.FetchPlanRequest)
def fetch_plan(cluster: VirtualCluster, body: schemas.FetchPlanRequest) -> Answer:
    return {
        "partitions": store.fetch_plan(
            cluster_id=cluster.pk,
            partitions=as_dicts(body.partitions),
            max_bytes=body.max_bytes,
            isolation_level=body.isolation_level,
        )
    }


@endpoint(schemas.TailFeedRequest)
def tail_feed(cluster: VirtualCluster, body: schemas.TailFeedRequest) -> Answer:
    """Without the web server's event loop (a plain Django server) there is no relay:
    the feed is not live, and agents plan every fetch through ``fetch-plan``."""
    return {"epoch": "", "seq": 0, "live": False, "reset": True, "entries": []}


async def tail_feed_on_loop(
    cluster: VirtualCluster, body: schemas.TailFeedRequest, gone: asyncio.Event
) -> Answer:
    """The long-poll on the web server's loop (``feed_relay``)."""
    return await feed_relay.RELAY.poll(
        cluster.pk, body.epoch, body.after, body.wait_ms / 1000, gone
    )


tail_feed.on_loop = tail_feed_on_loop


@endpoint(schemas.ListOffsetsRequest)
def list_offsets(cluster: VirtualCluster, body: schemas.ListOffsetsRequest) -> Answer:
    return {
        "partitions": store.list_offsets(
            cluster_id=cluster.pk, partitions=as_dicts(body.partitions)
        )
    }


@endpoint(schemas.DeleteRecordsRequest)
def delete_records(cluster: VirtualCluster, body: schemas.DeleteRecordsRequest) -> Answer:
    return {
        "partitions": store.records_delete(
            cluster_id=cluster.pk, partitions=as_dicts(body.partitions)
        )
    }


@endpoint(schemas.InitProducerIdRequest)
def init_producer_id(cluster: VirtualCluster, body: schemas.InitProducerIdRequest) -> Answer:
    if body.transactional_id:
        return transactions.txn_init(
            cluster_id=cluster.pk,
            transactional_id=body.transactional_id,
            timeout_ms=body.transaction_timeout_ms,
            producer_id=body.producer_id,
            producer_epoch=body.producer_epoch,
        )
    producer_id, epoch = store.producer_id_init(cluster_id=cluster.pk)
    return {"error_code": 0, "producer_id": producer_id, "producer_epoch": epoch}


@endpoint(schemas.TopicsListRequest)
def topics_list_view(cluster: VirtualCluster, body: schemas.TopicsListRequest) -> Answer:
    return topics_list(cluster, body.names, body.topic_ids)


@endpoint(schemas.TopicsCreateRequest)
def topics_create_view(cluster: VirtualCluster, body: schemas.TopicsCreateRequest) -> Answer:
    return topics_create(cluster, as_dicts(body.topics), body.validate_only)


@endpoint(schemas.TopicsDeleteRequest)
def topics_delete_view(cluster: VirtualCluster, body: schemas.TopicsDeleteRequest) -> Answer:
    return topics_delete(cluster, body.names, body.topic_ids)


@endpoint(schemas.TopicsCreatePartitionsRequest)
def topics_create_partitions_view(
    cluster: VirtualCluster, body: schemas.TopicsCreatePartitionsRequest
) -> Answer:
    return topics_create_partitions(cluster, as_dicts(body.topics), body.validate_only)


@endpoint(schemas.TopicsDescribeConfigsRequest)
def topics_describe_configs_view(
    cluster: VirtualCluster, body: schemas.TopicsDescribeConfigsRequest
) -> Answer:
    return topics_describe_configs(cluster, body.names)


@endpoint(schemas.TopicsAlterConfigsRequest)
def topics_alter_configs_view(
    cluster: VirtualCluster, body: schemas.TopicsAlterConfigsRequest
) -> Answer:
    return topics_alter_configs(
        cluster, as_dicts(body.topics), body.incremental, body.validate_only
    )


@endpoint(schemas.BrokerConfigsDescribeRequest)
def broker_configs_describe_view(
    cluster: VirtualCluster, body: schemas.BrokerConfigsDescribeRequest
) -> Answer:
    return broker_configs_describe(cluster)


@endpoint(schemas.BrokerConfigsAlterRequest)
def broker_configs_alter_view(
    cluster: VirtualCluster, body: schemas.BrokerConfigsAlterRequest
) -> Answer:
    return broker_configs_alter(
        cluster, as_dicts(body.ops), incremental=body.incremental, validate_only=body.validate_only
    )


@endpoint(schemas.OffsetsCommitRequest)
def offsets_commit(cluster: VirtualCluster, body: schemas.OffsetsCommitRequest) -> Answer:
    return group_offsets_commit(
        cluster,
        body.group_id,
        as_dicts(body.offsets),
        agent_id=body.agent_id,
        epoch=body.epoch,
        generation=body.generation,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id,
    )


def _registered(cluster: VirtualCluster, agent_ids: set[str]) -> None:
    """Leases are held by the cluster's registered agents only."""
    known = set(
        Agent.objects.filter(cluster=cluster, agent_id__in=agent_ids).values_list(
            "agent_id", flat=True
        )
    )
    for agent_id in sorted(agent_ids - known):
        raise CallRefused(409, f"agent {agent_id} is not registered in this cluster")


@endpoint(schemas.GroupsLeasesRequest)
def groups_leases(cluster: VirtualCluster, body: schemas.GroupsLeasesRequest) -> Answer:
    _registered(cluster, {body.agent_id} | {o.agent_id for o in body.offer})
    return group_leases_exchange(
        cluster_id=cluster.pk,
        agent_id=body.agent_id,
        ttl_ms=body.ttl_ms,
        acquire=list(body.acquire),
        renew=[(r.group_id, r.epoch) for r in body.renew],
        release=[(r.group_id, r.epoch) for r in body.release],
        offer=[(o.group_id, o.agent_id) for o in body.offer],
        resume=[(r.group_id, r.epoch) for r in body.resume],
    )


@endpoint(schemas.GroupsSaveRequest)
def groups_save(cluster: VirtualCluster, body: schemas.GroupsSaveRequest) -> Answer:
    state = as_dict(body)
    error = group_state_save(
        cluster_id=cluster.pk,
        agent_id=body.agent_id,
        group_id=body.group_id,
        epoch=body.epoch,
        state=state,
    )
    return {"error_code": int(error)}


@endpoint(schemas.OffsetsFetchRequest)
def offsets_fetch(cluster: VirtualCluster, body: schemas.OffsetsFetchRequest) -> Answer:
    partitions = None if body.partitions is None else as_dicts(body.partitions)
    return group_offsets_fetch(
        cluster, body.group_id, partitions, require_stable=body.require_stable
    )


# --- journals (lightning topics, Ripcord; docs/AGENT_API.md "journal/…") ----------------


@endpoint(schemas.JournalLeaseRequest)
def journal_lease(cluster: VirtualCluster, body: schemas.JournalLeaseRequest) -> Answer:
    return journal_lease_hold(
        cluster_id=cluster.pk,
        journal=body.journal,
        agent_id=body.agent_id,
        seconds=body.lease_s,
        token=body.token,
    )


@endpoint(schemas.JournalStatusRequest)
def journal_status_view(cluster: VirtualCluster, body: schemas.JournalStatusRequest) -> Answer:
    prefix = cluster.public_id + "/"
    if any(not key.startswith(prefix) for key in body.file_keys):
        raise CallRefused(400, "bad request: $.file_keys: keys must be under the cluster's prefix")
    return {"committed": journal_status(cluster_id=cluster.pk, file_keys=list(body.file_keys))}


# --- transactions (KIP-98; metadata_store/transactions.py) ------------------------------


def _txn(cluster: VirtualCluster, body: schemas.TxnBody) -> Answer:
    return {
        "cluster_id": cluster.pk,
        "transactional_id": body.transactional_id,
        "producer_id": body.producer_id,
        "producer_epoch": body.producer_epoch,
    }


@endpoint(schemas.TxnAddPartitionsRequest)
def txn_add_partitions(cluster: VirtualCluster, body: schemas.TxnAddPartitionsRequest) -> Answer:
    errors = transactions.txn_add_partitions(
        **_txn(cluster, body),
        partitions=[(p.topic, p.partition) for p in body.partitions],
        verify_only=body.verify_only,
    )
    return {
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "error_code": int(errors[(p.topic, p.partition)]),
            }
            for p in body.partitions
        ]
    }


@endpoint(schemas.TxnAddOffsetsRequest)
def txn_add_offsets(cluster: VirtualCluster, body: schemas.TxnAddOffsetsRequest) -> Answer:
    error = transactions.txn_add_offsets(**_txn(cluster, body))
    return {"error_code": int(error)}


@endpoint(schemas.TxnOffsetCommitRequest)
def txn_offset_commit(cluster: VirtualCluster, body: schemas.TxnOffsetCommitRequest) -> Answer:
    offsets = as_dicts(body.offsets)
    errors = transactions.txn_offset_commit(
        **_txn(cluster, body), group_id=body.group_id, offsets=offsets
    )
    return {
        "offsets": [
            {"topic": o["topic"], "partition": o["partition"], "error_code": int(e)}
            for o, e in zip(offsets, errors, strict=True)
        ]
    }


@endpoint(schemas.TxnEndRequest)
def txn_end(cluster: VirtualCluster, body: schemas.TxnEndRequest) -> Answer:
    error, moved = transactions.txn_end(**_txn(cluster, body), committed=body.committed)
    return {"error_code": int(error), "partitions": moved}


@endpoint(schemas.TxnDescribeRequest)
def txn_describe(cluster: VirtualCluster, body: schemas.TxnDescribeRequest) -> Answer:
    found = transactions.txn_describe(
        cluster_id=cluster.pk, transactional_ids=list(body.transactional_ids)
    )
    return {"transactions": found}


@endpoint(schemas.TxnListRequest)
def txn_list(cluster: VirtualCluster, body: schemas.TxnListRequest) -> Answer:
    return {"transactions": transactions.txn_list(cluster_id=cluster.pk)}


@endpoint(schemas.ShareHeartbeatRequest)
def share_heartbeat_view(cluster: VirtualCluster, body: schemas.ShareHeartbeatRequest) -> Answer:
    return share_heartbeat(
        cluster,
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        topics=None if body.topics is None else list(body.topics),
        client_id=body.client_id,
        client_host=body.client_host,
        rack_id=body.rack_id,
        agent_id=body.agent_id,
    )


@endpoint(schemas.ShareFetchRequest)
def share_fetch_view(cluster: VirtualCluster, body: schemas.ShareFetchRequest) -> Answer:
    return share_fetch(
        cluster,
        group_id=body.group_id,
        member_id=body.member_id,
        partitions=as_dicts(body.partitions),
        max_records=body.max_records,
        release=body.release,
    )


@endpoint(schemas.ShareConfigsDescribeRequest)
def share_configs_describe_view(
    cluster: VirtualCluster, body: schemas.ShareConfigsDescribeRequest
) -> Answer:
    return share_configs_describe(cluster, list(body.group_ids))


@endpoint(schemas.ShareConfigsAlterRequest)
def share_configs_alter_view(
    cluster: VirtualCluster, body: schemas.ShareConfigsAlterRequest
) -> Answer:
    return share_configs_alter(
        cluster,
        group_id=body.group_id,
        ops=as_dicts(body.ops),
        incremental=body.incremental,
        validate_only=body.validate_only,
    )


@endpoint(schemas.ShareGroupsListRequest)
def share_groups_list_view(cluster: VirtualCluster, body: schemas.ShareGroupsListRequest) -> Answer:
    return share_groups_list(cluster, None if body.group_ids is None else list(body.group_ids))


@endpoint(schemas.ShareGroupsDeleteRequest)
def share_groups_delete_view(
    cluster: VirtualCluster, body: schemas.ShareGroupsDeleteRequest
) -> Answer:
    return share_groups_delete(cluster, list(body.group_ids))


@endpoint(schemas.ShareOffsetsDescribeRequest)
def share_offsets_describe_view(
    cluster: VirtualCluster, body: schemas.ShareOffsetsDescribeRequest
) -> Answer:
    return share_offsets_describe(cluster, as_dicts(body.groups))


@endpoint(schemas.ShareOffsetsAlterRequest)
def share_offsets_alter_view(
    cluster: VirtualCluster, body: schemas.ShareOffsetsAlterRequest
) -> Answer:
    return share_offsets_alter(cluster, group_id=body.group_id, topics=as_dicts(body.topics))


@endpoint(schemas.ShareOffsetsDeleteRequest)
def share_offsets_delete_view(
    cluster: VirtualCluster, body: schemas.ShareOffsetsDeleteRequest
) -> Answer:
    return share_offsets_delete(cluster, group_id=body.group_id, topics=list(body.topics))
