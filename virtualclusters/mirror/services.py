"""Migrations: created and ended by users (REST, console), leased and reported on by the
cluster's jobs-role agents, whose copier does the copying (``agents/migration_copier.py``;
docs/ARCHITECTURE.md "Migration").

    running ─ migration_lease ─▶ leased (agent, token, deadline)
                                  │ migration_report: the copier's state, renews the lease;
                                  │   answers the topics cut over and whether it stopped
    migration_cutover(topics) ────┤ each named topic writable, continuing at its end offset
    migration_stop ───────────────┘ stopped: every topic still mirrored becomes writable
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.kafka.errors import ErrorCode
from metadata_store.group_offsets import group_offsets_commit
from metadata_store.mirroring import topic_mirroring_set
from metadata_store.models import GroupLease, Partition, Topic
from metadata_store.topics import TopicError, topic_create, topic_partitions_create
from team.audit import event_record
from tenancy.sealed import secret_open, secret_seal
from virtualclusters.mirror.models import Migration, MigrationTopic
from virtualclusters.models import VirtualCluster

MIN_LEASE_S, MAX_LEASE_S = 10, 600
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class LeaseLost(Exception):
    """The migration is not (or no longer) leased with this token, or it stopped."""


class MigrationInvalid(Exception):
    """A migration's settings that cannot work: `field` and a message for the user."""

    def __init__(self, field: str, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.conflict = conflict  # with what exists (a topic mirrored), not a bad value


def _regex(field: str, text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise MigrationInvalid(field, f"not a regular expression: {exc}") from None
    return text


@transaction.atomic
def migration_create(
    *,
    cluster: VirtualCluster,
    source_bootstrap: str,
    topics: str,
    groups: str = "",
    source_security: dict[str, Any] | None = None,
    start_from_now: bool = False,
) -> Migration:
    """A running migration of the topics (and groups) matching the regexes, whole names
    (`re.fullmatch`). The source password is sealed; the rest of `source_security` is
    kept as given ({protocol, sasl_mechanism, username, password, ca})."""
    security = dict(source_security or {})
    password = str(security.pop("password", "") or "")
    protocol = str(security.get("protocol") or "PLAINTEXT").upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise MigrationInvalid("source_security", f"protocol must be one of {SECURITY_PROTOCOLS}")
    security["protocol"] = protocol
    if protocol.startswith("SASL"):
        # (Credentials the source refuses show in the migration's state, as any failure
        # to reach it.)
        mechanism = str(security.get("sasl_mechanism") or "PLAIN").upper()
        if mechanism not in SASL_MECHANISMS:
            raise MigrationInvalid(
                "source_security", f"sasl_mechanism must be one of {SASL_MECHANISMS}"
            )
        security["sasl_mechanism"] = mechanism
    _regex("topics", topics)
    for name in MigrationTopic.objects.filter(
        migration__cluster=cluster,
        migration__state=Migration.State.RUNNING,
        state=MigrationTopic.State.MIRRORING,
    ).values_list("name", flat=True):
        if re.fullmatch(topics, name):
            raise MigrationInvalid(
                "topics", f"topic {name!r} is mirrored by a running migration", conflict=True
            )
    migration = Migration.objects.create(
        cluster=cluster,
        source_bootstrap=source_bootstrap,
        source_security=security,
        source_password_sealed=secret_seal(password) if password else "",
        topics_regex=_regex("topics", topics),
        groups_regex=_regex("groups", groups) if groups else "",
        start_from_now=start_from_now,
    )
    _audited(migration, "created", f"{migration.topics_regex} from {source_bootstrap}")
    return migration


def _audited(migration: Migration, action: str, what: str) -> None:
    """The audit log's line for a user's action on `migration` (created, cut over,
    stopped): the copier's frequent saves are no user's, so no model signal records them."""
    event_record(
        organization_id=migration.cluster.organization_id,
        action=action,
        target_type="migration",
        target_id=migration.public_id,
        target_name=what,
    )


def _release(migration: Migration, names: list[str] | None) -> list[str]:
    """Cut over the migration's mirrored topics named (None: all); their names."""
    rows = MigrationTopic.objects.select_for_update(of=("self",)).filter(
        migration=migration, state=MigrationTopic.State.MIRRORING
    )
    if names is not None:
        rows = rows.filter(name__in=names)
    done = []
    for row in rows.select_related("topic"):
        if row.topic is not None:
            topic_mirroring_set(topic=row.topic, migration_id="")
        row.state = MigrationTopic.State.CUT_OVER
        row.cut_over_at = timezone.now()
        row.save(update_fields=["state", "cut_over_at"])
        done.append(row.name)
    return done


@transaction.atomic
def migration_cutover(*, migration: Migration, topics: list[str]) -> list[str]:
    """End the migration for these topics: each becomes writable, the normal produce path
    continuing at its copied end offset. Names not mirrored by it raise
    `MigrationInvalid`; nothing changes then."""
    mirrored = set(
        MigrationTopic.objects.filter(
            migration=migration, state=MigrationTopic.State.MIRRORING, name__in=topics
        ).values_list("name", flat=True)
    )
    unknown = sorted(set(topics) - mirrored)
    if unknown:
        raise MigrationInvalid("topics", f"not mirrored by this migration: {', '.join(unknown)}")
    done = _release(migration, topics)
    _audited(migration, "cut over", ", ".join(sorted(done)))
    return done


@transaction.atomic
def migration_stop(*, migration: Migration) -> None:
    """Stop copying; every topic still mirrored becomes writable (as at a cutover).
    Stopping a stopped migration changes nothing."""
    locked = Migration.objects.select_for_update().filter(pk=migration.pk).first()
    if locked is None or locked.state == Migration.State.STOPPED:
        return
    released = _release(migration, None)
    migration.state = Migration.State.STOPPED
    migration.stopped_at = timezone.now()
    migration.lease_token = ""
    migration.save(update_fields=["state", "stopped_at", "lease_token"])
    _audited(migration, "stopped", ", ".join(sorted(released)) or migration.topics_regex)


# --- the copier's calls (agent API) --------------------------------------------------


def migration_lease(*, cluster: VirtualCluster, agent_id: str, lease_s: int) -> Migration | None:
    """A running migration of the cluster nobody holds (or whose lease ran out), leased
    to `agent_id` with a new token; None when there is none."""
    now = timezone.now()
    length = timedelta(seconds=min(max(lease_s, MIN_LEASE_S), MAX_LEASE_S))
    with transaction.atomic():
        migration = (
            Migration.objects.select_for_update(skip_locked=True)
            .filter(cluster=cluster, state=Migration.State.RUNNING)
            .exclude(lease_expires_at__gt=now)
            .order_by("id")
            .first()
        )
        if migration is None:
            return None
        migration.lease_agent = agent_id
        migration.lease_token = secrets.token_hex(16)
        migration.lease_expires_at = now + length
        migration.save(update_fields=["lease_agent", "lease_token", "lease_expires_at"])
    return migration


def migration_source(migration: Migration) -> dict[str, Any]:
    """The source as the copier needs it: bootstrap and security, password opened."""
    security = dict(migration.source_security)
    if migration.source_password_sealed:
        security["password"] = secret_open(migration.source_password_sealed)
    return {"bootstrap": migration.source_bootstrap, "security": security}


def _leased(cluster: VirtualCluster, migration_id: str, token: str) -> Migration:
    migration = (
        Migration.objects.select_for_update()
        .filter(cluster=cluster, public_id=migration_id)
        .first()
    )
    if (
        migration is None
        or migration.state != Migration.State.RUNNING
        or not token
        or not secrets.compare_digest(migration.lease_token, token)
    ):
        raise LeaseLost(f"migration {migration_id} is not leased with this token")
    return migration


@dataclass(frozen=True)
class TopicReport:
    name: str
    partitions: list[dict[str, Any]]
    error: str = ""


@transaction.atomic
def migration_report(
    *,
    cluster: VirtualCluster,
    migration_id: str,
    token: str,
    lease_s: int,
    waiting_for: str,
    topics: list[TopicReport],
    groups: dict[str, Any],
) -> dict[str, Any]:
    """The copier's state; renews its lease. Answers the topics it mirrors and those cut
    over (it stops copying those)."""
    migration = _leased(cluster, migration_id, token)
    now = timezone.now()
    migration.lease_expires_at = now + timedelta(
        seconds=min(max(lease_s, MIN_LEASE_S), MAX_LEASE_S)
    )
    migration.waiting_for = waiting_for[:1000]
    migration.reported_at = now
    if groups:
        migration.groups = {**migration.groups, **groups}
    migration.save(update_fields=["lease_expires_at", "waiting_for", "reported_at", "groups"])
    rows = {t.name: t for t in MigrationTopic.objects.filter(migration=migration)}
    for report in topics:
        row = rows.get(report.name)
        if row is not None and row.state == MigrationTopic.State.MIRRORING:
            row.partitions = report.partitions
            row.error = report.error[:10_000]
            row.save(update_fields=["partitions", "error"])
    return {
        "cut_over": sorted(n for n, r in rows.items() if r.state != MigrationTopic.State.MIRRORING),
        "mirroring": {
            n: str(r.topic_id)
            for n, r in rows.items()
            if r.state == MigrationTopic.State.MIRRORING and r.topic_id is not None
        },
    }


def _empty(topic: Topic) -> bool:
    return not Partition.objects.filter(topic=topic, high_watermark__gt=0).exists()


@transaction.atomic
def mirror_topic_create(
    *,
    cluster: VirtualCluster,
    migration_id: str,
    token: str,
    name: str,
    partitions: int,
    configs: dict[str, str],
) -> MigrationTopic:
    """The Floe topic mirroring source topic `name`: created with the source's partition
    count and configs, mirrored by the migration. An existing topic of that name is
    adopted only while nobody wrote to it; otherwise (or once cut over) the answer is the
    topic's row in another state, with its error. Asked again with more partitions (the
    source's topic grew), the mirrored topic grows to match, its new partitions mirrored."""
    migration = _leased(cluster, migration_id, token)
    row, _ = MigrationTopic.objects.select_for_update().get_or_create(
        migration=migration, name=name
    )
    if row.state != MigrationTopic.State.MIRRORING:
        return row
    if row.topic is not None:
        if partitions > row.topic.partition_count:  # the source's topic grew: follow it
            try:
                topic_partitions_create(
                    topic=row.topic, count=partitions, mirrored_by=migration.public_id
                )
            except TopicError as exc:
                row.error = f"the source has {partitions} partitions: {exc.message or exc}"
                row.save(update_fields=["error"])
                return row
        if row.error:  # (only a growth that failed sets a mirrored topic's error)
            row.error = ""
            row.save(update_fields=["error"])
        return row
    topic = Topic.objects.filter(cluster=cluster, name=name).first()
    if topic is None:
        try:
            topic = topic_create(
                cluster=cluster,
                name=name,
                num_partitions=partitions,
                replication_factor=-1,
                configs=configs,
            )
        except TopicError as exc:
            row.state, row.error = MigrationTopic.State.FAILED, exc.message or str(exc)
            row.save(update_fields=["state", "error"])
            return row
    elif topic.mirrored_by not in ("", migration.public_id):
        row.state = MigrationTopic.State.FAILED
        row.error = f"the topic is mirrored by migration {topic.mirrored_by}"
        row.save(update_fields=["state", "error"])
        return row
    elif not _empty(topic) and topic.mirrored_by != migration.public_id:
        row.state = MigrationTopic.State.FAILED
        row.error = "a topic of this name holds records written in Floe"
        row.save(update_fields=["state", "error"])
        return row
    elif topic.partition_count != partitions:
        row.state = MigrationTopic.State.FAILED
        row.error = (
            f"the Floe topic has {topic.partition_count} partitions, the source {partitions}"
        )
        row.save(update_fields=["state", "error"])
        return row
    topic_mirroring_set(topic=topic, migration_id=migration.public_id)
    row.topic = topic
    row.save(update_fields=["topic"])
    return row


def mirror_group_offsets(
    *,
    cluster: VirtualCluster,
    migration_id: str,
    token: str,
    group_id: str,
    offsets: list[dict[str, Any]],
) -> ErrorCode:
    """The source group's committed offsets, stored only while no Floe coordinator has
    ever held the group: a group a consumer used in Floe (the lease row outlives its
    holders) is never overwritten, even once it is empty again — NOT_COORDINATOR. The
    commit itself checks again in its transaction (``group_commit_check``)."""
    with transaction.atomic():
        _leased(cluster, migration_id, token)
        if GroupLease.objects.filter(cluster=cluster, group_id=group_id).exists():
            return ErrorCode.NOT_COORDINATOR
        answer = group_offsets_commit(cluster, group_id, offsets)
    codes = {int(o.get("error_code", 0)) for o in answer["offsets"]}
    codes.discard(0)
    return ErrorCode(min(codes)) if codes else ErrorCode.NONE
