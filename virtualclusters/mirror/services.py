"""Migrations: created and ended by users (REST, console), leased and reported on by the
cluster's jobs-role agents, whose copier does the copying (``agents/migration_copier.py``;
docs/ARCHITECTURE.md "Migration").

    running ─ migration_lease ─▶ leased (agent, epoch, token, expiry: metadata_store.leases)
                                  │ migration_report: the copier's state, renews the lease;
                                  │   answers the topics cut over and whether it stopped
    migration_cutover(topics) ────┤ each named topic writable, continuing at its end offset
    migration_stop ───────────────┘ stopped: every topic still mirrored becomes writable

With a source Schema Registry (schema linking, issue 38) the copier's agent also imports
the source's subjects into the cluster's registry in IMPORT mode (``agents/schema_linker.py``)
until `migration_cutover(schemas=True)` or `migration_stop` releases them: the subjects
it linked take registrations again (`SCHEMA_LINK_RELEASE`, filled by the schema registry
app, which this app never imports).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.ecma_regex import dialect_problem, ecma_compile
from core.kafka.errors import ErrorCode
from metadata_store import leases
from metadata_store.group_offsets import group_offsets_mirror
from metadata_store.leases import LeaseLost
from metadata_store.mirroring import topic_mirroring_set
from metadata_store.models import Lease, Partition, Topic
from metadata_store.selectors import agent_runs_jobs
from metadata_store.topic_configs import TOPIC_CONFIGS, config_problem
from metadata_store.topics import (
    TopicError,
    topic_configs_alter,
    topic_create,
    topic_partitions_create,
)
from team.audit import event_record
from tenancy.sealed import secret_open, secret_seal
from virtualclusters.mirror.models import Migration, MigrationTopic
from virtualclusters.models import VirtualCluster

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# A source Schema Registry's URL: http(s), a host name or IPv4 address, a port, a path.
REGISTRY_URL_PATTERN = r"https?://[A-Za-z0-9][A-Za-z0-9.-]*(?::[0-9]{1,5})?(?:/[^?#@\s]*)?"
# Called (cluster, subjects the linker reported, the subjects regex) when a migration's
# schema link ends, in its transaction: the schema registry app appends the function that
# gives the linked subjects back to normal registration (`SchemaRegistryConfig.ready`).
SCHEMA_LINK_RELEASE: list[Callable[[VirtualCluster, list[str], str], None]] = []
# Called (cluster, subject) when the linker links a subject: the schema registry app puts
# it in IMPORT mode, in the transaction that holds the migration's row (`link_subject`).
SCHEMA_LINK_IMPORT: list[Callable[[VirtualCluster, str], None]] = []


class MigrationInvalid(Exception):
    """A migration's settings that cannot work: `field` and a message for the user."""

    def __init__(self, field: str, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.conflict = conflict  # with what exists (a topic mirrored), not a bad value


def _regex(field: str, text: str) -> str:
    """A pattern that ECMA-262 (the schema's `format: regex`) and Python's `re` (the
    agents') both take and read alike (`core.ecma_regex`); else the first place they part."""
    problem = dialect_problem(text)
    if problem is not None:
        raise MigrationInvalid(field, f"not a regular expression here: {problem}")
    try:
        ecma_compile(text)  # as the agents will compile it
    except (re.error, OverflowError, RecursionError) as exc:
        raise MigrationInvalid(field, f"not a regular expression: {exc}") from None
    return text


def _schema_registry(given: dict[str, Any] | None) -> tuple[str, str, str]:
    """A source Schema Registry's (url, username, password): an http(s) URL of a host
    name or IPv4 address without credentials, query or fragment in it (basic auth is
    given apart; a password without a username is not sent)."""
    if not given:
        return "", "", ""
    url = str(given.get("url") or "").strip()
    if not re.fullmatch(REGISTRY_URL_PATTERN, url):
        raise MigrationInvalid(
            "source_schema_registry",
            "url must be http(s)://host[:port][/path], without credentials, query or "
            "fragment (give username and password apart)",
        )
    return url.rstrip("/"), str(given.get("username") or ""), str(given.get("password") or "")


@transaction.atomic
def migration_create(
    *,
    cluster: VirtualCluster,
    source_bootstrap: str,
    topics: str,
    groups: str = "",
    source_security: dict[str, Any] | None = None,
    start_from_now: bool = False,
    source_schema_registry: dict[str, Any] | None = None,
    subjects: str = "",
) -> Migration:
    """A running migration of the topics (and groups) matching the regexes, whole names
    (`re.fullmatch`). The source password is sealed; the rest of `source_security` is
    kept as given ({protocol, sasl_mechanism, username, password, ca}). With
    `source_schema_registry` ({url, username, password}: the password sealed too) the
    subjects matching `subjects` (every one when blank) are linked; without it `subjects`
    means nothing."""
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
    registry_url, registry_user, registry_password = _schema_registry(source_schema_registry)
    migration = Migration.objects.create(
        cluster=cluster,
        source_bootstrap=source_bootstrap,
        source_security=security,
        source_password_sealed=secret_seal(password) if password else "",
        topics_regex=_regex("topics", topics),
        groups_regex=_regex("groups", groups) if groups else "",
        start_from_now=start_from_now,
        schema_registry_url=registry_url,
        schema_registry_username=registry_user,
        schema_registry_password_sealed=secret_seal(registry_password) if registry_password else "",
        subjects_regex=_regex("subjects", subjects or ".*") if registry_url else "",
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


def _schemas_release(migration: Migration, *, cut_over: bool) -> None:
    """End the schema link (a cutover of the schemas, or the migration's stop): the
    subjects it linked take registrations again."""
    if not migration.schemas_linked:
        return
    if cut_over:
        migration.schemas_cut_over_at = timezone.now()
        migration.save(update_fields=["schemas_cut_over_at"])
    linked = [str(s) for s in migration.schema_link.get("subjects") or ()]
    for release in SCHEMA_LINK_RELEASE:
        release(migration.cluster, linked, migration.subjects_regex)


@transaction.atomic
def migration_cutover(
    *, migration: Migration, topics: list[str], schemas: bool = False
) -> list[str]:
    """End the migration for these topics: each becomes writable, the normal produce path
    continuing at its copied end offset; with `schemas`, end the schema link too (its
    subjects take registrations again, nothing is synced any more). Names not mirrored by
    it raise `MigrationInvalid`; nothing changes then."""
    Migration.objects.select_for_update().filter(pk=migration.pk).first()
    migration.refresh_from_db()
    if schemas and not migration.schemas_linked:
        raise MigrationInvalid("schemas", "the migration links no schemas (or not any more)")
    mirrored = set(
        MigrationTopic.objects.filter(
            migration=migration, state=MigrationTopic.State.MIRRORING, name__in=topics
        ).values_list("name", flat=True)
    )
    unknown = sorted(set(topics) - mirrored)
    if unknown:
        raise MigrationInvalid("topics", f"not mirrored by this migration: {', '.join(unknown)}")
    if schemas:
        _schemas_release(migration, cut_over=True)
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
    migration.refresh_from_db()
    _schemas_release(migration, cut_over=False)
    released = _release(migration, None)
    migration.state = Migration.State.STOPPED
    migration.stopped_at = timezone.now()
    migration.save(update_fields=["state", "stopped_at"])
    leases.lease_end(
        cluster_id=migration.cluster_id, subject=leases.migration_subject(migration.public_id)
    )
    _audited(migration, "stopped", ", ".join(sorted(released)) or migration.topics_regex)


# --- the copier's calls (agent API) --------------------------------------------------


def migration_lease(
    *, cluster: VirtualCluster, agent_id: str, lease_s: int
) -> tuple[Migration, Lease] | None:
    """A running migration of the cluster nobody holds (or whose lease expired, on the
    database's clock), leased to `agent_id` with the next epoch and a new token; None
    when there is none, or none for this agent (its agent group is not among the
    cluster's ``jobs_agent_groups``)."""
    if not agent_runs_jobs(cluster, agent_id):
        return None
    running = list(
        Migration.objects.filter(cluster=cluster, state=Migration.State.RUNNING).order_by("id")
    )
    held = leases.leases_live(
        cluster_id=cluster.pk,
        subjects=[leases.migration_subject(m.public_id) for m in running],
    )
    for migration in running:
        subject = leases.migration_subject(migration.public_id)
        if subject in held:
            continue
        with transaction.atomic():
            locked = (
                Migration.objects.select_for_update(skip_locked=True)
                .filter(pk=migration.pk, state=Migration.State.RUNNING)
                .first()
            )
            if locked is None:
                continue  # another agent is leasing it right now
            lease = leases.lease_take(
                cluster_id=cluster.pk,
                subject=subject,
                holder=agent_id,
                seconds=leases.lease_seconds(subject, lease_s),
            )
            if lease is None:
                continue  # another agent was first
            locked.lease_agent = agent_id
            locked.save(update_fields=["lease_agent"])
        return locked, lease
    return None


def migration_source(migration: Migration) -> dict[str, Any]:
    """The source as the copier needs it: bootstrap and security, password opened."""
    security = dict(migration.source_security)
    if migration.source_password_sealed:
        security["password"] = secret_open(migration.source_password_sealed)
    return {"bootstrap": migration.source_bootstrap, "security": security}


def migration_schema_source(migration: Migration) -> dict[str, Any] | None:
    """The source Schema Registry as the linker needs it (password opened), while the
    link holds; None without one."""
    if not migration.schemas_linked:
        return None
    password = migration.schema_registry_password_sealed
    return {
        "url": migration.schema_registry_url,
        "username": migration.schema_registry_username,
        "password": secret_open(password) if password else "",
        "subjects": migration.subjects_regex,
    }


def _leased(
    cluster: VirtualCluster, migration_id: str, token: str, *, renew_s: int | None = None
) -> Migration:
    """The running migration `token` holds the live lease of (renewed for `renew_s`
    seconds when given), locked until the caller's transaction ends; `LeaseLost` if
    the lease was superseded or expired, or the migration stopped."""
    migration = (
        Migration.objects.select_for_update()
        .filter(cluster=cluster, public_id=migration_id)
        .first()
    )
    if migration is None or migration.state != Migration.State.RUNNING:
        raise LeaseLost(f"migration {migration_id} is not running")
    subject = leases.migration_subject(migration_id)
    if renew_s is None:
        leases.lease_check(cluster_id=cluster.pk, subject=subject, token=token)
    else:
        leases.lease_renew(
            cluster_id=cluster.pk,
            subject=subject,
            token=token,
            seconds=leases.lease_seconds(subject, renew_s),
        )
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
    schema_link: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The copier's state; renews its lease. Answers the topics it mirrors and those cut
    over (it stops copying those), and whether the schema link still holds."""
    migration = _leased(cluster, migration_id, token, renew_s=lease_s)
    migration.waiting_for = waiting_for[:1000]
    migration.reported_at = timezone.now()
    if groups:
        migration.groups = {**migration.groups, **groups}
    if schema_link and migration.schemas_linked:
        # (The subjects linked stay listed, whichever lease linked them.)
        linked = set(migration.schema_link.get("subjects") or ()) | set(
            schema_link.get("subjects") or ()
        )
        migration.schema_link = {**schema_link, "subjects": sorted(linked)}
    migration.save(update_fields=["waiting_for", "reported_at", "groups", "schema_link"])
    rows = {t.name: t for t in MigrationTopic.objects.filter(migration=migration)}
    for report in topics:
        row = rows.get(report.name)
        if row is not None and row.state == MigrationTopic.State.MIRRORING:
            row.partitions = report.partitions
            row.error = report.error[:10_000]
            row.save(update_fields=["partitions", "error"])
    answer: dict[str, Any] = {
        "cut_over": sorted(n for n, r in rows.items() if r.state != MigrationTopic.State.MIRRORING),
        "mirroring": {
            n: str(r.topic_id)
            for n, r in rows.items()
            if r.state == MigrationTopic.State.MIRRORING and r.topic_id is not None
        },
    }
    if migration.schema_registry_url:
        answer["schemas_linked"] = migration.schemas_linked
    return answer


# What a Kafka source does with a topic that reports no value for these (Tansu reports
# no topic configs at all): Kafka's defaults (retention.ms 7 days, cleanup.policy
# delete, retention.bytes -1), the configs that decide what Floe deletes after the
# cutover. Floe's own defaults (the cluster's default_retention_ms) are not the source's.
KAFKA_DEFAULTS_COPIED = ("cleanup.policy", "retention.ms", "retention.bytes")
CONFIG_ORIGINS = ("topic", "source_default", "kafka_default")


def mirror_configs(
    configs: dict[str, str], origins: dict[str, str]
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The configs a mirrored topic gets from its source's DescribeConfigs (`origins`:
    "topic" or "source_default" per name), with Kafka's defaults where the source gave
    no value: (the configs Floe sets, what the migration shows of each — value, origin,
    and the error when Floe refuses a value, which is then not set)."""
    kept: dict[str, str] = {}
    shown: dict[str, dict[str, str]] = {}
    for name, value in sorted(configs.items()):
        origin = origins.get(name, "topic")
        shown[name] = {"value": value, "origin": origin if origin in CONFIG_ORIGINS else "topic"}
        problem = config_problem(name, value)
        if problem:
            shown[name]["error"] = problem
        else:
            kept[name] = value
    for name in KAFKA_DEFAULTS_COPIED:
        if name not in kept:
            kept[name] = TOPIC_CONFIGS[name].default  # Kafka's default, as Floe's table says
            shown[name] = {"value": kept[name], "origin": "kafka_default"}
    return kept, shown


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
    config_origins: dict[str, str] | None = None,
) -> MigrationTopic:
    """The Floe topic mirroring source topic `name`: created with the source's partition
    count and configs (`mirror_configs`: effective values, Kafka's defaults where the
    source gave none; they take effect at the cutover, as no job of Floe's touches a
    mirrored topic), mirrored by the migration. An existing topic of that name is
    adopted only while nobody wrote to it (the source's configs set on it); otherwise
    (or once cut over) the answer is the topic's row in another state, with its error.
    Asked again with more partitions (the source's topic grew), the mirrored topic grows
    to match, its new partitions mirrored."""
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
    copied, row.configs = mirror_configs(configs, config_origins or {})
    topic = Topic.objects.filter(cluster=cluster, name=name).first()
    if topic is None:
        try:
            topic = topic_create(
                cluster=cluster,
                name=name,
                num_partitions=partitions,
                replication_factor=-1,
                configs=copied,
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
    else:  # adopted: the source's configs over its own
        ops = [{"name": n, "op": "set", "value": v} for n, v in copied.items()]
        topic = topic_configs_alter(topic=topic, ops=ops, incremental=True)
    topic_mirroring_set(topic=topic, migration_id=migration.public_id)
    row.topic = topic
    row.save(update_fields=["topic", "configs"])
    return row


def mirror_group_offsets(
    *,
    cluster: VirtualCluster,
    migration_id: str,
    token: str,
    group_id: str,
    offsets: list[dict[str, Any]],
) -> tuple[ErrorCode, str]:
    """The source group's committed offsets, stored while the group is not used in Floe
    (`group_offsets_mirror`: no member ever joined it here, no client of Floe committed
    to it — reads do not count). A group used in Floe is never overwritten, even once it
    is empty again: NOT_COORDINATOR and why, in words ("active in Floe: a consumer
    joined at …", "committed in Floe at …")."""
    with transaction.atomic():
        _leased(cluster, migration_id, token)
        answer = group_offsets_mirror(cluster, group_id, offsets)
    codes = {int(o.get("error_code", 0)) for o in answer["offsets"]}
    codes.discard(0)
    return (ErrorCode(min(codes)) if codes else ErrorCode.NONE), answer["used"]


@transaction.atomic
def link_subject(*, cluster: VirtualCluster, migration_id: str, token: str, subject: str) -> bool:
    """The linker links `subject`: listed as linked and put in IMPORT mode while the
    migration's row is locked — so a cutover of the schemas (or a stop), which locks it
    too, releases it, and nothing is linked after it. False: the link ended."""
    migration = _leased(cluster, migration_id, token)
    if not migration.schemas_linked:
        return False
    linked = list(migration.schema_link.get("subjects") or ())
    if subject not in linked:
        migration.schema_link = {**migration.schema_link, "subjects": sorted([*linked, subject])}
        migration.save(update_fields=["schema_link"])
    for link in SCHEMA_LINK_IMPORT:
        link(cluster, subject)
    return True
