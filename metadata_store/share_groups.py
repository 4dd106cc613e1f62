"""Share groups (KIP-932) in the metadata store: membership and the share-partition state.

A share group's members are assigned every partition of the topics they subscribe to —
several members read one partition, record by record — so the assignment needs no
coordinator's memory: any agent answers any member's heartbeat from the group's row
(`share_heartbeat`). Each partition the group reads has one row of records in flight
(`SharePartition`, its logic in `share_state`): a share fetch applies the member's
acknowledgements and acquires its next records in one call (`share_fetch`), one
statement per partition either way, and a member that leaves or whose session ends has
what it held released for the others. Lock deadlines are this process's clock in ms.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from core.kafka.errors import ErrorCode
from metadata_store.clusters import VirtualCluster
from metadata_store.models import Partition, ShareGroup, SharePartition, Topic
from metadata_store.share_state import (
    ACQUIRED,
    AVAILABLE,
    InvalidRecordState,
    ShareState,
)
from metadata_store.store import JSON, _cursor
from metadata_store.store import _stable_offsets as stable_offsets

# The group configs (Kafka's names, its defaults; IncrementalAlterConfigs on a GROUP
# resource sets overrides): name -> (default, kind, lowest, highest).
CONFIG_DEFAULTS: dict[str, tuple[Any, str, int, int]] = {
    "share.auto.offset.reset": ("latest", "string", 0, 0),
    "share.isolation.level": ("read_uncommitted", "string", 0, 0),
    "share.record.lock.duration.ms": (30_000, "int", 1_000, 3_600_000),
    "share.delivery.count.limit": (5, "int", 2, 10),
    "share.session.timeout.ms": (45_000, "int", 1_000, 3_600_000),
    "share.heartbeat.interval.ms": (5_000, "int", 100, 3_600_000),
}
CONFIG_CHOICES = {
    "share.auto.offset.reset": ("latest", "earliest"),
    "share.isolation.level": ("read_uncommitted", "read_committed"),
}
# Kafka's group.share.partition.max.record.locks is 2000; records in flight per partition.
MAX_IN_FLIGHT = 5_000
MAX_RECORDS_PER_FETCH = 5_000


def _now_ms() -> int:
    return int(time.time() * 1000)


def group_configs(configs: dict[str, Any]) -> dict[str, Any]:
    """Every share.* config: the overrides over Kafka's defaults."""
    return {name: configs.get(name, spec[0]) for name, spec in CONFIG_DEFAULTS.items()}


def config_check(name: str, value: str | None) -> str | None:
    """Why `value` is not a valid value of group config `name` ("" / None: fine)."""
    spec = CONFIG_DEFAULTS.get(name)
    if spec is None:
        return f"Unknown group config name: {name}"
    if value is None:
        return None
    if spec[1] == "int":
        try:
            number = int(value)
        except ValueError:
            return f"{name} must be an integer"
        if not spec[2] <= number <= spec[3]:
            return f"{name} must be between {spec[2]} and {spec[3]}"
        return None
    if value not in CONFIG_CHOICES[name]:
        return f"{name} must be one of {', '.join(CONFIG_CHOICES[name])}"
    return None


def share_configs_describe(cluster: VirtualCluster, group_ids: list[str]) -> JSON:
    """Each group's share.* configs (a group never seen has Kafka's defaults)."""
    stored = dict(
        ShareGroup.objects.filter(cluster=cluster, group_id__in=group_ids).values_list(
            "group_id", "configs"
        )
    )
    return {
        "groups": [
            {
                "group_id": group_id,
                "configs": [
                    {
                        "name": name,
                        "value": str(stored.get(group_id, {}).get(name, spec[0])),
                        "is_default": name not in stored.get(group_id, {}),
                    }
                    for name, spec in CONFIG_DEFAULTS.items()
                ],
            }
            for group_id in group_ids
        ]
    }


@transaction.atomic
def share_configs_alter(
    cluster: VirtualCluster,
    *,
    group_id: str,
    ops: list[JSON],
    incremental: bool,
    validate_only: bool,
) -> JSON:
    """Set or delete a group's share.* overrides (AlterConfigs replaces them all). Any
    bad name or value refuses the whole change (INVALID_CONFIG, naming it)."""
    if not group_id:
        return {"error_code": int(ErrorCode.INVALID_GROUP_ID), "error_message": "empty group id"}
    group = _group_locked(cluster, group_id)
    configs: dict[str, Any] = dict(group.configs) if incremental else {}
    for op in ops:
        name, kind, value = str(op["name"]), op.get("op", "set"), op.get("value")
        problem = config_check(name, None if value is None else str(value))
        if problem is None and kind in ("append", "subtract"):
            problem = f"{name} is not a list: {kind} does not apply"
        if problem is None and kind == "set" and value is None:
            problem = f"{name} needs a value"
        if problem:
            return {"error_code": int(ErrorCode.INVALID_CONFIG), "error_message": problem}
        if kind == "delete":
            configs.pop(name, None)
        else:
            spec = CONFIG_DEFAULTS[name]
            configs[name] = int(str(value)) if spec[1] == "int" else str(value)
    if not validate_only:
        group.configs = configs
        group.save(update_fields=["configs"])
    return {"error_code": 0, "error_message": None}


def _group_locked(cluster: VirtualCluster, group_id: str) -> ShareGroup:
    ShareGroup.objects.bulk_create(
        [ShareGroup(cluster=cluster, group_id=group_id)], ignore_conflicts=True
    )
    return ShareGroup.objects.select_for_update().get(cluster=cluster, group_id=group_id)


def _state(row: SharePartition) -> ShareState:
    return ShareState(row.start_offset, row.end_offset, [list(r) for r in row.in_flight])


def _store(row: SharePartition, state: ShareState) -> None:
    row.start_offset, row.end_offset, row.in_flight = state.start, state.end, state.saved()


def _release_members(cluster: VirtualCluster, group_id: str, members: set[str], limit: int) -> None:
    """What `members` hold in any partition of the group, released."""
    if not members:
        return
    changed = []
    for row in (
        SharePartition.objects.select_for_update()
        .filter(cluster=cluster, group_id=group_id)
        .order_by("id")
    ):
        state = _state(row)
        if any(state.release_member(m, limit) for m in sorted(members)):
            state.compact()
            _store(row, state)
            changed.append(row)
    if changed:
        SharePartition.objects.bulk_update(changed, ["start_offset", "end_offset", "in_flight"])


def _subscribed(cluster: VirtualCluster, names: set[str]) -> list[JSON]:
    """The assignment of a member subscribing to `names`: every partition of each."""
    topics = Topic.objects.filter(cluster=cluster, name__in=names).order_by("name")
    return [{"topic_id": str(t.id), "partitions": list(range(t.partition_count))} for t in topics]


@transaction.atomic
def share_heartbeat(
    cluster: VirtualCluster,
    *,
    group_id: str,
    member_id: str,
    member_epoch: int,
    topics: list[str] | None,
    client_id: str = "",
    client_host: str = "",
    rack_id: str | None = None,
    agent_id: str = "",
) -> JSON:
    """ShareGroupHeartbeat: join (epoch 0), stay (the member's epoch), leave (-1).
    Members whose session ended are removed first and what they held released. A member
    that leaves keeps its records until its share session closes (`share_fetch`'s
    `release`) or their locks expire, as Kafka's: the client closes its sessions — with
    its last acknowledgements — alongside the leave, in either order."""
    group = _group_locked(cluster, group_id)
    settings = group_configs(group.configs)
    now = _now_ms()
    members: dict[str, Any] = dict(group.members)
    limit = int(settings["share.delivery.count.limit"])
    expired = {m for m, info in members.items() if info.get("expires_ms", 0) <= now}
    answer: JSON = {
        "error_code": 0,
        "error_message": None,
        "member_id": member_id,
        "member_epoch": -1,
        "heartbeat_interval_ms": int(settings["share.heartbeat.interval.ms"]),
        "assignment": None,
    }
    gone = set(expired)
    if member_epoch == -1:
        gone.add(member_id)
    for m in gone:
        members.pop(m, None)
    if gone & set(group.members):
        group.group_epoch += 1
    _release_members(cluster, group_id, expired & set(group.members), limit)
    if member_epoch == -1:
        group.members = members
        group.save(update_fields=["members", "group_epoch"])
        return answer
    info = members.get(member_id)
    if member_epoch == 0:
        if not member_id:
            member_id = answer["member_id"] = uuid.uuid4().hex
            info = None
        if info is None:
            group.group_epoch += 1
            info = {"topics": sorted(set(topics or ())), "assigned": None}
    elif info is None:
        answer["error_code"] = int(ErrorCode.UNKNOWN_MEMBER_ID)
        answer["error_message"] = f"member {member_id} is not in share group {group_id}"
        group.members = members
        group.save(update_fields=["members", "group_epoch"])
        return answer
    elif member_epoch > int(info.get("member_epoch", 0)):
        answer["error_code"] = int(ErrorCode.FENCED_MEMBER_EPOCH)
        answer["error_message"] = f"member epoch {member_epoch} is ahead of the group's"
        return answer
    if topics is not None and sorted(set(topics)) != info.get("topics"):
        info["topics"] = sorted(set(topics))
        group.group_epoch += 1
    assignment = _subscribed(cluster, set(info["topics"]))
    info.update(
        member_epoch=group.group_epoch,
        client_id=client_id,
        client_host=client_host,
        rack_id=rack_id if rack_id is not None else info.get("rack_id"),
        agent_id=agent_id,
        expires_ms=now + int(settings["share.session.timeout.ms"]),
    )
    if assignment != info.get("assigned") or member_epoch != group.group_epoch:
        answer["assignment"] = assignment
    info["assigned"] = assignment
    members[member_id] = info
    answer["member_epoch"] = group.group_epoch
    group.members = members
    group.save(update_fields=["members", "group_epoch"])
    return answer


@dataclass
class _Wanted:
    topic_id: str
    partition: int
    acks: list[JSON]
    acquire: bool
    give_back: list[JSON]
    release: bool = False


@transaction.atomic
def share_fetch(
    cluster: VirtualCluster,
    *,
    group_id: str,
    member_id: str,
    partitions: list[JSON],
    max_records: int,
    release: bool = False,
) -> JSON:
    """Apply a member's acknowledgements and acquire its next records, in one
    transaction; `release` (its share session closed, KIP-932's final epoch) then
    releases what the member still holds in any of the group's partitions. `partitions`: ``{topic_id, partition, acks: [{first, last, types}],
    give_back: [{first, last}], acquire: bool}`` (`give_back`: acquired records the agent
    could not send, `ShareState.give_back`). Answers ``{lock_ms, isolation_level, partitions: [{topic_id,
    partition, error_code, ack_error_code, acquired: [[first, last, delivery count]]}]}``
    with the partitions in the order asked."""
    group = ShareGroup.objects.filter(cluster=cluster, group_id=group_id).first()
    settings = group_configs(group.configs if group else {})
    lock_ms = int(settings["share.record.lock.duration.ms"])
    limit = int(settings["share.delivery.count.limit"])
    read_committed = settings["share.isolation.level"] == "read_committed"
    answer: JSON = {
        "lock_ms": lock_ms,
        "isolation_level": 1 if read_committed else 0,
        "partitions": [],
    }
    wanted = [
        _Wanted(str(p["topic_id"]), int(p["partition"]), list(p.get("acks") or ()),
                bool(p.get("acquire")), list(p.get("give_back") or ()), bool(p.get("release")))
        for p in partitions
    ]  # fmt: skip
    try:
        topic_uuids = {uuid.UUID(w.topic_id) for w in wanted}
    except ValueError:
        topic_uuids = set()
    known = {
        (str(p.topic_id), p.index): p
        for p in Partition.objects.filter(topic__cluster=cluster, topic_id__in=topic_uuids)
    }
    ids = sorted({known[(w.topic_id, w.partition)].id for w in wanted
                  if (w.topic_id, w.partition) in known})  # fmt: skip
    # A partition only released (a closed session's) gets no row: nothing is held there.
    started = {known[(w.topic_id, w.partition)].id for w in wanted
               if (w.topic_id, w.partition) in known and (w.acquire or w.acks or w.give_back)}  # fmt: skip
    stable = _stable_offsets(ids) if read_committed else {}
    missing = [
        SharePartition(
            cluster=cluster,
            group_id=group_id,
            partition_id=p.id,
            start_offset=_initial_offset(p, settings),
            end_offset=_initial_offset(p, settings),
        )
        for p in known.values()
        if p.id in started
    ]
    SharePartition.objects.bulk_create(missing, ignore_conflicts=True)
    rows = {
        row.partition_id: row
        for row in SharePartition.objects.select_for_update()
        .filter(cluster=cluster, group_id=group_id, partition_id__in=ids)
        .order_by("partition_id")
    }
    now = _now_ms()
    left = max(1, min(max_records, MAX_RECORDS_PER_FETCH))
    changed: dict[int, SharePartition] = {}
    for w in wanted:
        out: JSON = {
            "topic_id": w.topic_id,
            "partition": w.partition,
            "error_code": 0,
            "ack_error_code": 0,
            "acquired": [],
        }
        answer["partitions"].append(out)
        part = known.get((w.topic_id, w.partition))
        if part is not None and part.id not in rows and not (w.acquire or w.acks or w.give_back):
            continue  # released, never read: nothing held
        if part is None or part.id not in rows:
            out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            out["ack_error_code"] = out["error_code"] if w.acks else 0
            continue
        row = rows[part.id]
        state = _state(row)
        touched = state.expire(now, limit)
        touched = state.archive_below(part.log_start_offset) or touched
        for ack in w.acks:
            try:
                state.acknowledge(
                    member_id,
                    int(ack["first"]),
                    int(ack["last"]),
                    [int(k) for k in ack["types"]],
                    limit,
                    renew_ms=now + lock_ms,
                )
                touched = True
            except InvalidRecordState:
                out["ack_error_code"] = int(ErrorCode.INVALID_RECORD_STATE)
        for back in w.give_back:
            state.give_back(member_id, int(back["first"]), int(back["last"]))
            touched = True
        if w.release:
            # Its share session on that agent closed, after its last acknowledgements:
            # KIP-932 releases the records it acquired through that session only — a
            # session with another agent (other partitions) may still acknowledge.
            touched = state.release_member(member_id, limit) or touched
        if w.acquire and left > 0:
            until = stable.get(part.id, part.high_watermark)
            got = state.acquire(
                member_id, left, until=until, deadline_ms=now + lock_ms, max_in_flight=MAX_IN_FLIGHT
            )
            if got:
                touched = True
                left -= sum(last - first + 1 for first, last, _ in got)
                out["acquired"] = [list(g) for g in got]
        if touched:
            state.compact()
            _store(row, state)
            changed[part.id] = row
    if changed:
        SharePartition.objects.bulk_update(
            list(changed.values()), ["start_offset", "end_offset", "in_flight"]
        )
    if release:
        _release_members(cluster, group_id, {member_id}, limit)
    return answer


def _initial_offset(part: Partition, settings: dict[str, Any]) -> int:
    if settings["share.auto.offset.reset"] == "earliest":
        return part.log_start_offset
    return part.high_watermark


def _stable_offsets(partition_ids: list[int]) -> dict[int, int]:
    with _cursor() as cursor:
        return stable_offsets(cursor, partition_ids)


def share_partitions_describe(cluster: VirtualCluster, group_id: str) -> list[JSON]:
    """Each partition the group reads: start offset, records in flight (acquired and
    available), and lag (records from the start offset to the high watermark not yet
    done with)."""
    out = []
    for row in (
        SharePartition.objects.filter(cluster=cluster, group_id=group_id)
        .select_related("partition__topic")
        .order_by("partition__topic__name", "partition__index")
    ):
        state = _state(row)
        part = row.partition
        out.append(
            {
                "topic": part.topic.name,
                "topic_id": str(part.topic_id),
                "partition": part.index,
                "start_offset": state.start,
                "acquired": state.count(ACQUIRED),
                "available": state.count(AVAILABLE),
                "lag": share_lag(row, part.high_watermark),
            }
        )
    return out


def share_lag(row: SharePartition, high_watermark: int) -> int:
    """KIP-1226's share-partition lag: the records from the start offset to the high
    watermark that are not done with (acknowledged or archived) yet."""
    done = sum(
        int(r[1]) - int(r[0]) + 1 for r in row.in_flight if r[2] not in (ACQUIRED, AVAILABLE)
    )
    return max(high_watermark - int(row.start_offset) - done, 0)


def live_members(group: ShareGroup) -> list[str]:
    """The members whose session has not ended (a group with none is empty)."""
    now = _now_ms()
    return [m for m, info in group.members.items() if info.get("expires_ms", 0) > now]


def share_groups_list(cluster: VirtualCluster, group_ids: list[str] | None = None) -> JSON:
    """The cluster's share groups: members (those whose session has not ended) and
    each partition's state (`share_partitions_describe`) when asked by id."""
    now = _now_ms()
    groups = ShareGroup.objects.filter(cluster=cluster).order_by("group_id")
    if group_ids is not None:
        groups = groups.filter(group_id__in=group_ids)
    out = []
    for group in groups:
        members = [
            {"member_id": m, **info}
            for m, info in sorted(group.members.items())
            if info.get("expires_ms", 0) > now
        ]
        item: JSON = {
            "group_id": group.group_id,
            "group_epoch": group.group_epoch,
            "state": "Stable" if members else "Empty",
            "members": members,
        }
        if group_ids is not None:
            item["partitions"] = share_partitions_describe(cluster, group.group_id)
        out.append(item)
    return {"groups": out}


@transaction.atomic
def share_groups_delete(cluster: VirtualCluster, group_ids: list[str]) -> JSON:
    """DeleteGroups of share groups: only without live members (NON_EMPTY_GROUP); the
    group's configs and partition state go with it. A group that is no share group
    answers GROUP_ID_NOT_FOUND (the caller tries the other kinds)."""
    answers = []
    for group_id in group_ids:
        group = (
            ShareGroup.objects.select_for_update()
            .filter(cluster=cluster, group_id=group_id)
            .first()
        )
        if group is None:
            code = ErrorCode.GROUP_ID_NOT_FOUND
        elif live_members(group):
            code = ErrorCode.NON_EMPTY_GROUP
        else:
            SharePartition.objects.filter(cluster=cluster, group_id=group_id).delete()
            group.delete()
            code = ErrorCode.NONE
        answers.append({"group_id": group_id, "error_code": int(code)})
    return {"groups": answers}
