"""The migration copier (issue 30; docs/ARCHITECTURE.md "Migration"): a jobs-role agent
leases a migration of its cluster and mirrors the source Kafka's topics into it, every
batch at its source offsets, through this agent's own bucket — the data never passes
through the control plane.

The source is read with aiokafka's low-level client (`AIOKafkaClient.send` of Fetch,
Metadata and DescribeConfigs requests), not a consumer: a Fetch answer carries the
partition's record batches as the source stored them (compressed as the producer sent
them) with its high watermark and log start offset, and the copier writes those bytes
unchanged into a segment file (`core.segment.SegmentBuilder`, the write path's format),
PUTs it and commits it with ``mirror/commit`` at the batches' own offsets. A consumer
would decode and re-encode every record and hide the offsets' gaps. It fetches
read_committed, so a transaction is copied once it ended; its control batches become
the commit's markers (kept as Floe's own transaction markers, an abort with its first
offset), so read_committed consumers of the mirror skip what the source's skip.

Each partition's copy goes on from the destination's high watermark, read from the
metadata store at start (and after every restart or lost lease): a batch is committed
only at or after it, so a copier that restarts, or two that overlap, never duplicate and
never skip. A source that cannot be reached is retried with a growing pause while the
lease is kept; `waiting_for` says so in the migration's state.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agents.control_plane import ControlPlaneClient, ControlPlaneError, ControlPlaneRejected
from agents.metrics import Counter
from agents.schema_linker import SchemaLinker, SourceRegistry
from agents.schema_registry.registry import SchemaRegistry
from core.ecma_regex import EcmaPattern, ecma_compile
from core.kafka.records import batch_crc_ok, decode_records, iter_batches, whole_batches_length
from core.segment import SegmentBuilder
from core.storage import ObjectStore

log = logging.getLogger(__name__)

SOURCE_TIMEOUT_MS = 15_000
FETCH_WAIT_MS = 500
PARTITION_FETCH_BYTES = 1 << 20
MAX_PARTITION_FETCH_BYTES = 64 << 20  # a source batch bigger than this stops its partition
FETCH_BYTES = 16 << 20
DISCOVER_S = 10.0  # new source topics (and partitions) are looked for this often
REPORT_S = 2.0
GROUPS_S = 5.0
MAX_MIGRATIONS = (
    8  # migrations one agent mirrors at once  # the source's group offsets are copied this often
)
# Topic configs copied from the source with their effective values there — set on the
# topic or the source's defaults (its DescribeConfigs marks those default): a Floe
# default would not be what the source does. They take effect in Floe at the cutover.
COPIED_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "compression.type",
        "delete.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.ms",
    }
)
_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs v1+: a config set on the topic itself
READ_COMMITTED = 1  # Fetch's isolation level

_COPIED_BYTES = Counter(
    "floe_migration_copied_bytes_total", "Record-batch bytes a migration copied from its source."
)
_COPIED_BATCHES = Counter(
    "floe_migration_copied_batches_total", "Record batches a migration copied from its source."
)


class LeaseLost(Exception):
    """The control plane refused the lease: another agent copies, or the migration stopped."""


class SourceError(Exception):
    """The source answered something the copier cannot use."""


@dataclass
class MirroredPartition:
    topic: str
    index: int
    topic_id: str
    next_offset: int  # the destination's high watermark: the next batch starts at or after
    source_log_start: int = -1
    source_end: int = -1
    bytes_copied: int = 0
    error: str = ""
    fetch_bytes: int = PARTITION_FETCH_BYTES
    dest_log_start: int = 0
    # Transactions of the source partition not ended yet as the copy goes: producer id →
    # first offset, from the Fetch answers' aborted transactions and the copied batches.
    aborted: dict[int, int] = field(default_factory=dict)
    open_txns: dict[int, int] = field(default_factory=dict)

    def state(self) -> dict[str, Any]:
        return {
            "partition": self.index,
            "source_log_start": self.source_log_start,
            "source_end_offset": self.source_end,
            "bytes_copied": self.bytes_copied,
            "error": self.error[:1000],
        }


@dataclass
class _Migration:
    id: str
    lease: str
    source: dict[str, Any]
    topics: EcmaPattern
    start_from_now: bool
    partitions: dict[tuple[str, int], MirroredPartition] = field(default_factory=dict)
    topic_errors: dict[str, str] = field(default_factory=dict)
    cut_over: set[str] = field(default_factory=set)
    waiting_for: str = ""
    groups: EcmaPattern | None = None
    group_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    metadata: Any = None  # the source's ClusterMetadata (aiokafka), refreshed on discovery
    by_id: dict[tuple[str, int], MirroredPartition] = field(default_factory=dict)
    linker: SchemaLinker | None = None  # schema linking (agents/schema_linker.py)

    def leader(self, part: MirroredPartition) -> int | None:
        from aiokafka.structs import TopicPartition

        if self.metadata is None:
            return None
        leader = self.metadata.leader_for_partition(TopicPartition(part.topic, part.index))
        return leader if leader is not None and leader >= 0 else None


def response_dict(response: Any) -> dict[str, Any]:
    """An aiokafka response as nested dicts by field name — as its `to_object()`, which
    fails on a null array (a Fetch answer's `aborted_transactions` is null when a broker,
    Floe among them, has none)."""

    def convert(schema: Any, value: Any) -> Any:
        names = getattr(schema, "names", None)
        if names is not None:
            if not isinstance(value, tuple | list):  # the response itself: attributes
                value = [getattr(value, n) for n in names]
            return {n: convert(t, v) for n, t, v in zip(names, schema.fields, value)}
        inner = getattr(schema, "array_of", None)
        if inner is not None:
            return [convert(inner, v) for v in value or ()]
        return value

    answer: dict[str, Any] = convert(response.SCHEMA, response)
    return answer


def source_client_options(source: dict[str, Any]) -> dict[str, Any]:
    """aiokafka client options for a migration's source (bootstrap and security)."""
    security = source.get("security") or {}
    protocol = str(security.get("protocol") or "PLAINTEXT")
    options: dict[str, Any] = {
        "bootstrap_servers": source["bootstrap"],
        "security_protocol": protocol,
        "request_timeout_ms": SOURCE_TIMEOUT_MS,
        "client_id": "floe-migration",
    }
    if protocol.startswith("SASL"):
        options["sasl_mechanism"] = security.get("sasl_mechanism") or "PLAIN"
        options["sasl_plain_username"] = security.get("username")
        options["sasl_plain_password"] = security.get("password")
    if protocol.endswith("SSL"):
        context = ssl.create_default_context()
        if security.get("ca"):
            context.load_verify_locations(cadata=security["ca"])
        options["ssl_context"] = context
    return options


def _marker(part: MirroredPartition, batch: memoryview, header: Any) -> dict[str, Any]:
    """A control batch as a `mirror/commit` marker: its type from its record's key
    (KIP-98: version int16, type int16 — 0 abort, 1 commit); an abort names its
    transaction's first offset (the source's aborted transactions, else the first batch
    of the producer copied since its last marker)."""
    _, records = decode_records(batch, verify_crc=False)
    key = records[0].key if records else None
    if key is None or len(key) < 4:
        raise SourceError(f"control batch at source offset {header.base_offset} has no marker")
    committed = int.from_bytes(key[2:4], "big", signed=True) == 1
    pid = header.producer_id
    known = [
        o for o in (part.aborted.pop(pid, None), part.open_txns.pop(pid, None)) if o is not None
    ]
    marker = {
        "topic_id": part.topic_id,
        "partition": part.index,
        "offset": header.base_offset,
        "producer_id": pid,
        "producer_epoch": header.producer_epoch,
        "committed": committed,
        "timestamp": header.max_timestamp,
    }
    if not committed:
        # (None known: the transaction left no records here, nothing to hide.)
        marker["first_offset"] = min(known) if known else header.base_offset
    return marker


class MigrationCopier:
    """`await copier.run_forever()`: lease a migration of the cluster, mirror it while the
    lease holds, then look for one again."""

    def __init__(
        self,
        client: ControlPlaneClient,
        store: ObjectStore,
        *,
        agent_id: str,
        cluster_id: str,
        lease_s: int = 30,
        poll_s: float = 2.0,
    ) -> None:
        self.client = client
        self.store = store
        self.agent_id = agent_id
        self.cluster_id = cluster_id
        self.lease_s = lease_s
        self.poll_s = poll_s
        self._boot = secrets.token_hex(4)
        self._sequence = 0

    async def run_forever(self) -> None:
        """Lease every running migration nobody holds (up to `MAX_MIGRATIONS` at once),
        each mirrored by its own task until its lease is lost."""
        running: dict[str, asyncio.Task[None]] = {}
        try:
            while True:
                for done in [m for m, task in running.items() if task.done()]:
                    del running[done]
                leased = None
                if len(running) < MAX_MIGRATIONS:
                    try:
                        answer = await self.client.call(
                            "migrations/lease",
                            {"agent_id": self.agent_id, "lease_s": self.lease_s},
                            timeout_s=30,
                        )
                        leased = answer.get("migration")
                    except ControlPlaneError as exc:
                        log.warning("migrations/lease failed: %s", exc)
                if not leased:
                    await asyncio.sleep(self.poll_s)
                    continue
                migration = _Migration(
                    id=leased["id"],
                    lease=leased["lease"],
                    source=leased["source"],
                    topics=ecma_compile(leased["topics"]),
                    start_from_now=bool(leased.get("start_from_now")),
                    groups=ecma_compile(leased["groups"]) if leased.get("groups") else None,
                )
                migration.linker = self._linker(migration, leased.get("schema_registry"))
                log.info(
                    "migration %s: leased (epoch %s), source %s",
                    migration.id,
                    leased.get("epoch"),
                    migration.source["bootstrap"],
                )
                stale = running.pop(migration.id, None)
                if stale is not None:  # ours, but its lease lapsed: a new lease, a new start
                    stale.cancel()
                running[migration.id] = asyncio.get_running_loop().create_task(
                    self._mirror_logged(migration)
                )
        finally:
            for task in running.values():
                task.cancel()

    def _linker(self, migration: _Migration, schemas: dict[str, Any] | None) -> SchemaLinker | None:
        """The migration's schema linker, when it names a source Schema Registry."""
        if not schemas or not schemas.get("url"):
            return None

        async def link_subject(subject: str) -> bool:
            answer = await self._call(migration, "migrations/link-subject", {"subject": subject})
            return bool(answer.get("linked"))

        source = SourceRegistry(
            schemas["url"], schemas.get("username") or "", schemas.get("password") or ""
        )
        registry = SchemaRegistry(self.client, self.store, cluster_id=self.cluster_id)
        linker = SchemaLinker(
            registry, source, subjects=schemas.get("subjects") or ".*", link_subject=link_subject
        )
        if schemas.get("error"):  # the sealed password cannot be opened
            linker.error, linker.active = str(schemas["error"]), False
        return linker

    async def _mirror_logged(self, migration: _Migration) -> None:
        try:
            await self.mirror(migration)
        except LeaseLost as exc:
            log.info("migration %s: %s", migration.id, exc)
        except Exception:
            log.exception("migration %s: the copier failed", migration.id)

    async def mirror(self, migration: _Migration) -> None:
        """Copy until the lease is lost (raises `LeaseLost`)."""
        reporting = asyncio.get_running_loop().create_task(self._report_loop(migration))
        copying = asyncio.get_running_loop().create_task(self._copy_loop(migration))
        linking = (
            asyncio.get_running_loop().create_task(migration.linker.run_forever())
            if migration.linker is not None
            else None
        )
        try:
            done, _ = await asyncio.wait({reporting, copying}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            tasks = [t for t in (reporting, copying, linking) if t is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- the control plane -----------------------------------------------------------

    async def _call(
        self,
        migration: _Migration,
        name: str,
        body: dict[str, Any],
        *,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        try:
            return await self.client.call(
                name,
                {"migration_id": migration.id, "lease": migration.lease, **body},
                timeout_s=timeout_s,
            )
        except ControlPlaneRejected as exc:
            if "409" in str(exc) or "not leased" in str(exc):
                raise LeaseLost(str(exc)) from None
            raise

    async def _report_loop(self, migration: _Migration) -> None:
        while True:
            topics: dict[str, list[dict[str, Any]]] = {}
            for part in migration.partitions.values():
                topics.setdefault(part.topic, []).append(part.state())
            for name in migration.topic_errors:
                topics.setdefault(name, [])
            body = {
                "lease_s": self.lease_s,
                "waiting_for": migration.waiting_for,
                "groups": migration.group_states,
                "topics": [
                    {"name": n, "partitions": p, "error": migration.topic_errors.get(n, "")}
                    for n, p in topics.items()
                ],
            }
            if migration.linker is not None:
                body["schema_link"] = migration.linker.state()
            try:
                answer = await self._call(migration, "migrations/report", body)
                migration.cut_over = set(answer.get("cut_over") or ())
                if migration.linker is not None and not answer.get("schemas_linked", True):
                    migration.linker.active = False  # the schemas were cut over
                for key in [k for k in migration.partitions if k[0] in migration.cut_over]:
                    part = migration.partitions.pop(key)
                    migration.by_id.pop((part.topic_id, part.index), None)
            except ControlPlaneError as exc:
                log.warning("migration %s: report failed: %s", migration.id, exc)
            await asyncio.sleep(REPORT_S)

    # --- copying --------------------------------------------------------------------

    async def _copy_loop(self, migration: _Migration) -> None:
        from aiokafka.client import AIOKafkaClient

        delay = 1.0
        while True:
            source = AIOKafkaClient(**source_client_options(migration.source))
            try:
                await asyncio.wait_for(source.bootstrap(), SOURCE_TIMEOUT_MS / 1000)
                migration.waiting_for = ""
                delay = 1.0
                discovered = grouped = 0.0
                while True:
                    if time.monotonic() - discovered > DISCOVER_S:
                        await self._discover(migration, source)
                        discovered = time.monotonic()
                    if migration.groups is not None and time.monotonic() - grouped > GROUPS_S:
                        await self._copy_groups(migration, source)
                        grouped = time.monotonic()
                    if not await self._copy_round(migration, source):
                        await asyncio.sleep(0.2)  # nothing new anywhere: no busy loop
            except (LeaseLost, asyncio.CancelledError):
                raise
            except Exception as exc:  # the source (or our bucket) failed: wait, reconnect
                migration.waiting_for = (
                    f"the source at {migration.source['bootstrap']}: {type(exc).__name__}: {exc}"
                )
                log.warning("migration %s: %s; retrying in %.0fs", migration.id, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 15.0)
            finally:
                await source.close()

    async def _discover(self, migration: _Migration, source: Any) -> None:
        """Mirror the source topics the regex names that are not mirrored yet."""
        cluster = await asyncio.wait_for(source.fetch_all_metadata(), SOURCE_TIMEOUT_MS / 1000)
        migration.metadata = cluster
        known: dict[str, set[int]] = {}
        for topic, index in migration.partitions:
            known.setdefault(topic, set()).add(index)
        log.debug("migration %s: source topics %s", migration.id, sorted(cluster.topics()))
        for name in sorted(cluster.topics()):
            if name in migration.cut_over or name.startswith("__"):
                continue
            if not migration.topics.fullmatch(name):
                continue
            partitions = sorted(cluster.partitions_for_topic(name) or ())
            grown = name in known
            if grown:  # mirrored already: only partitions the source added since
                partitions = [p for p in partitions if p not in known[name]]
            if not partitions:
                continue
            total = len(partitions) + len(known.get(name, ()))
            configs, origins = ({}, {}) if grown else await self._source_configs(source, name)
            answer = await self._call(
                migration,
                "migrations/topic",
                {
                    "name": name,
                    "partitions": total,
                    "configs": configs,
                    "config_origins": origins,
                },
            )
            if answer.get("state") != "mirroring" or not answer.get("topic_id"):
                if answer.get("state") == "cut_over":
                    migration.cut_over.add(name)
                else:
                    migration.topic_errors[name] = answer.get("error") or answer.get("state", "")
                continue
            if answer.get("error"):  # the mirror could not follow the source's growth
                migration.topic_errors[name] = answer["error"]
                continue
            migration.topic_errors.pop(name, None)
            log.info(
                "migration %s: mirroring %s (%d partitions%s)",
                migration.id,
                name,
                total,
                f", {len(partitions)} new on the source" if grown else "",
            )
            await self._add_partitions(
                migration, source, name, answer["topic_id"], partitions, from_now=not grown
            )

    async def _copy_groups(self, migration: _Migration, source: Any) -> None:
        """The committed offsets of the source's groups the regex names, for the mirrored
        partitions, each stored in Floe while the group is empty there — a partition only
        once the mirror holds its offset (a consumer moved over must find it)."""
        from aiokafka.protocol.admin import ListGroupsRequest
        from aiokafka.protocol.commit import OffsetFetchRequest

        assert migration.groups is not None
        names: set[str] = set()
        for broker in migration.metadata.brokers() if migration.metadata else ():
            response = await asyncio.wait_for(
                source.send(broker.nodeId, ListGroupsRequest()), SOURCE_TIMEOUT_MS / 1000
            )
            for group in response_dict(response).get("groups", []):
                if migration.groups.fullmatch(group["group"]):
                    names.add(group["group"])
        topics: dict[str, list[int]] = {}
        for part in migration.partitions.values():
            topics.setdefault(part.topic, []).append(part.index)
        if not topics:
            return
        for name in sorted(names):
            coordinator = await asyncio.wait_for(
                source.coordinator_lookup(0, name), SOURCE_TIMEOUT_MS / 1000
            )
            response = response_dict(
                await asyncio.wait_for(
                    source.send(coordinator, OffsetFetchRequest(name, sorted(topics.items()))),
                    SOURCE_TIMEOUT_MS / 1000,
                )
            )
            offsets, shown = [], []
            for topic in response.get("topics", []):
                for answer in topic["partitions"]:
                    mirrored = migration.partitions.get((topic["topic"], answer["partition"]))
                    offset = answer["offset"]
                    if mirrored is None or answer["error_code"] or offset < 0:
                        continue
                    ready = offset <= mirrored.next_offset
                    shown.append(
                        {
                            "topic": mirrored.topic,
                            "partition": mirrored.index,
                            "source_offset": offset,
                            "copied_offset": offset if ready else None,
                        }
                    )
                    if ready:
                        offsets.append(
                            {
                                "topic": mirrored.topic,
                                "partition": mirrored.index,
                                "offset": offset,
                                "metadata": answer.get("metadata") or "",
                            }
                        )
            state, error = "copied", ""
            if offsets:
                answer = await self._call(
                    migration,
                    "migrations/group-offsets",
                    {"group_id": name, "offsets": offsets},
                )
                if answer.get("error_code"):
                    # Why, from the store: "active in Floe: a consumer joined at …",
                    # "committed in Floe at …" — never overwritten.
                    state, error = answer.get("used") or "active in Floe: not overwritten", ""
                    for item in shown:
                        item["copied_offset"] = None
            if any(item["copied_offset"] is None for item in shown) and state == "copied":
                state = "waiting for the copy to reach its offsets"
            migration.group_states[name] = {"state": state, "error": error, "partitions": shown}

    async def _source_configs(
        self, source: Any, name: str
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The topic's configs Floe keeps, with their values on the source whether set on
        the topic or the source's defaults (DescribeConfigs), and where each came from:
        "topic" (set on it) or "source_default". A source that answers none (Tansu) gets
        Kafka's defaults from the control plane."""
        from aiokafka.protocol.admin import DescribeConfigsRequest

        node = source.get_random_node()
        try:
            response = await asyncio.wait_for(
                source.send(
                    node, DescribeConfigsRequest([(2, name, None)], include_synonyms=False)
                ),
                SOURCE_TIMEOUT_MS / 1000,
            )
        except Exception as exc:  # a source without DescribeConfigs: Kafka's defaults
            log.warning("DescribeConfigs of %s failed on the source: %s", name, exc)
            return {}, {}
        configs: dict[str, str] = {}
        origins: dict[str, str] = {}
        for resource in response_dict(response).get("resources", []):
            for entry in resource.get("config_entries", []):
                config = entry["config_names"]
                if config not in COPIED_CONFIGS or entry.get("config_value") is None:
                    continue
                source_kind = entry.get("config_source")
                is_default = entry.get("is_default", source_kind != _DYNAMIC_TOPIC_CONFIG)
                configs[config] = str(entry["config_value"])
                origins[config] = "source_default" if is_default else "topic"
        return configs, origins

    async def _add_partitions(
        self,
        migration: _Migration,
        source: Any,
        name: str,
        topic_id: str,
        indexes: list[int],
        *,
        from_now: bool = True,
    ) -> None:
        """Start each partition where the destination ends (its high watermark); with
        `start_from_now` (and `from_now`: not partitions the source added later, which
        are copied whole), one never copied to at the source's end."""
        answer = await self.client.call(
            "list-offsets",
            {
                "partitions": [
                    {"topic_id": topic_id, "partition": i, "timestamp": -1} for i in indexes
                ]
            },
        )
        for item in answer["partitions"]:
            if item.get("error_code"):
                raise SourceError(f"the destination's partition {name}-{item['partition']}: {item}")
            part = MirroredPartition(name, item["partition"], topic_id, item["high_watermark"])
            part.dest_log_start = item.get("log_start_offset", 0)
            migration.partitions[(name, part.index)] = part
            migration.by_id[(topic_id, part.index)] = part
        if migration.start_from_now and from_now:
            # Only partitions never copied to: from the source's end on.
            fresh = [
                p
                for p in migration.partitions.values()
                if p.topic == name and p.index in indexes and p.next_offset == 0
            ]
            by_leader: dict[int | None, list[MirroredPartition]] = {}
            for part in fresh:
                by_leader.setdefault(migration.leader(part), []).append(part)
            for leader, parts in by_leader.items():
                if leader is None:
                    raise SourceError(f"no leader for {name} on the source")
                await self._fetch(migration, source, parts, probe=True)
            if fresh:
                await self._commit(
                    migration,
                    None,
                    SegmentBuilder(),
                    [(p, p.source_end) for p in fresh if p.source_end > 0],
                )

    async def _copy_round(self, migration: _Migration, source: Any) -> bool:
        """One Fetch per source broker for its partitions, each answer one segment file and
        one commit; whether anything was copied."""
        by_leader: dict[int, list[MirroredPartition]] = {}
        for part in list(migration.partitions.values()):
            if part.topic in migration.cut_over:
                continue
            leader = migration.leader(part)
            if leader is None:
                migration.metadata = await source.fetch_all_metadata()
                continue
            by_leader.setdefault(leader, []).append(part)
        if not by_leader:
            await asyncio.sleep(0.5)
            return False
        copied = await asyncio.gather(
            *(
                self._copy_from(migration, source, leader, parts)
                for leader, parts in by_leader.items()
            )
        )
        return any(copied)

    async def _fetch(
        self,
        migration: _Migration,
        source: Any,
        parts: list[MirroredPartition],
        *,
        probe: bool = False,
    ) -> list[tuple[MirroredPartition, bytes]]:
        """Fetch `parts` from their leader; (partition, whole batches) for those with data."""
        from aiokafka.protocol.fetch import FetchRequest

        topics: dict[str, list[tuple[int, int, int]]] = {}
        for p in parts:
            offset = (
                max(p.next_offset, p.source_log_start) if not probe else max(p.source_log_start, 0)
            )
            topics.setdefault(p.topic, []).append((p.index, offset, 1 if probe else p.fetch_bytes))
        leader = migration.leader(parts[0])
        request = FetchRequest(
            # (Tansu 0.6 answers a Fetch with no wait with no topics at all.)
            100 if probe else FETCH_WAIT_MS,
            1,
            FETCH_BYTES,
            # read_committed (KIP-98): only up to the last stable offset — a transaction
            # is copied once it ended — with the aborted transactions the records hold.
            READ_COMMITTED,
            list(topics.items()),
        )
        response = await asyncio.wait_for(source.send(leader, request), SOURCE_TIMEOUT_MS / 1000)
        by_key = {(p.topic, p.index): p for p in parts}
        out: list[tuple[MirroredPartition, bytes]] = []
        stale = False
        for topic in response_dict(response)["topics"]:
            for answer in topic["partitions"]:
                # (aiokafka names a Fetch answer's topic "topics", a ListOffsets one's "topic")
                part = by_key.get((topic.get("topics", topic.get("topic")), answer["partition"]))
                if part is None:
                    continue
                code = answer["error_code"]
                if code == 1:  # OFFSET_OUT_OF_RANGE: the source's log start passed us
                    await self._source_log_start(migration, source, part)
                    continue
                if code in (3, 6, 74, 75):  # unknown partition, not leader, fenced/unknown epoch
                    stale = True
                    part.error = f"source error {code}"
                    continue
                if code:
                    part.error = f"source error {code}"
                    continue
                part.error = ""
                for aborted in answer.get("aborted_transactions") or ():
                    first = part.aborted.get(aborted["producer_id"], aborted["first_offset"])
                    part.aborted[aborted["producer_id"]] = min(first, aborted["first_offset"])
                part.source_end = answer["highwater_offset"]
                part.source_log_start = answer.get("log_start_offset", part.source_log_start)
                records = answer.get("message_set") or answer.get("records") or b""
                if probe or not records:
                    continue
                whole = whole_batches_length(records)
                if whole == 0:
                    if (
                        len(records) >= part.fetch_bytes
                        and part.fetch_bytes < MAX_PARTITION_FETCH_BYTES
                    ):
                        part.fetch_bytes *= 2  # a batch bigger than we asked for
                    else:
                        part.error = "the source answered a partial or corrupt batch"
                    continue
                out.append((part, records[:whole]))
        if stale:
            migration.metadata = await source.fetch_all_metadata()
        return out

    async def _source_log_start(
        self, migration: _Migration, source: Any, part: MirroredPartition
    ) -> None:
        """The source partition's log start offset (ListOffsets earliest)."""
        from aiokafka.protocol.offset import OffsetRequest

        leader = migration.leader(part)
        response = await asyncio.wait_for(
            source.send(leader, OffsetRequest(-1, 0, [(part.topic, [(part.index, -2)])])),
            SOURCE_TIMEOUT_MS / 1000,
        )
        for topic in response_dict(response)["topics"]:
            for answer in topic["partitions"]:
                if not answer["error_code"]:
                    part.source_log_start = answer["offset"]

    async def _copy_from(
        self, migration: _Migration, source: Any, leader: int, parts: list[MirroredPartition]
    ) -> bool:
        fetched = await self._fetch(migration, source, parts)
        segment = SegmentBuilder()
        batches: list[dict[str, Any]] = []
        markers: list[dict[str, Any]] = []
        for part, data in fetched:
            for pos, length, header in iter_batches(data):
                if header.last_offset < part.next_offset:
                    continue  # the destination has it (a batch the source answered again)
                batch = memoryview(data)[pos : pos + length]
                if not batch_crc_ok(batch, header):
                    part.error = f"batch at source offset {header.base_offset} fails its CRC"
                    break
                if header.is_control:  # kept as Floe keeps its own markers
                    markers.append(_marker(part, batch, header))
                    continue
                if header.is_transactional:
                    part.open_txns.setdefault(header.producer_id, header.base_offset)
                entry = segment.append(
                    topic_id=uuid.UUID(part.topic_id),
                    partition=part.index,
                    batch=batch,
                    header=header,
                )
                batches.append(
                    {
                        "topic_id": part.topic_id,
                        "partition": part.index,
                        "base_offset": header.base_offset,
                        "last_offset": header.last_offset,
                        "records": max(1, header.record_count),
                        "pos": entry.position,
                        "len": entry.length,
                        "max_ts": header.max_timestamp,
                    }
                )
        # The source's log start, followed forward: up to what this commit copies (the
        # batch holding it is copied first), or past everything when the source
        # partition holds nothing beyond it.
        ends: dict[tuple[str, int], int] = {}
        for b in batches:
            ends[(b["topic_id"], b["partition"])] = b["last_offset"] + 1
        for m in markers:
            key = (m["topic_id"], m["partition"])
            ends[key] = max(ends.get(key, 0), m["offset"] + 1)
        starts = []
        for p in parts:
            end = ends.get((p.topic_id, p.index), p.next_offset)
            start = p.source_log_start
            if start > p.dest_log_start and (start <= end or start >= p.source_end >= 0):
                starts.append((p, start))
        if not batches and not starts and not markers:
            return False
        await self._commit(migration, batches, segment, starts, markers)
        return bool(batches or markers)

    async def _commit(
        self,
        migration: _Migration,
        batches: list[dict[str, Any]] | None,
        segment: SegmentBuilder,
        starts: list[tuple[MirroredPartition, int]],
        markers: list[dict[str, Any]] | None = None,
    ) -> None:
        """PUT the segment (if any batch) and commit it at the batches' offsets, with the
        transaction markers met."""
        body: dict[str, Any] = {
            "log_starts": [
                {"topic_id": p.topic_id, "partition": p.index, "offset": s} for p, s in starts
            ],
            "markers": markers or [],
        }
        if batches:
            key = self._object_key(migration)
            data = segment.finish()
            await asyncio.get_running_loop().run_in_executor(None, self.store.put, key, data)
            body.update(file_key=key, size=len(data), batches=batches)
        # Under the lease: a commit of a superseded or expired lease is refused (409,
        # `LeaseLost`): this copier stops and, leased again, starts from the
        # destination's high watermark as read then, never from what it thought.
        try:
            answer = await self._call(migration, "mirror/commit", body, timeout_s=60)
        except LeaseLost:
            if batches:  # nothing references it: gone now, not at the orphan cleanup
                await asyncio.get_running_loop().run_in_executor(
                    None, self.store.delete, body["file_key"]
                )
            raise
        for item in answer.get("partitions", []):
            part = migration.by_id.get((item["topic_id"], item["partition"]))
            if part is not None:
                part.next_offset = item["high_watermark"]
                part.dest_log_start = item["log_start_offset"]
        for marker, result in zip(markers or [], answer.get("markers", [])):
            part = migration.by_id.get((marker["topic_id"], marker["partition"]))
            if part is not None and result["error_code"]:
                part.error = f"marker at {marker['offset']} refused: error {result['error_code']}"
        for batch, result in zip(batches or [], answer.get("batches", [])):
            part = migration.by_id.get((batch["topic_id"], batch["partition"]))
            if part is None:
                continue
            if result["error_code"]:
                part.error = f"commit refused: error {result['error_code']}"
            else:
                part.bytes_copied += batch["len"]
                _COPIED_BYTES.inc(batch["len"])
                _COPIED_BATCHES.inc(1)

    def _object_key(self, migration: _Migration) -> str:
        now = datetime.now(UTC)
        self._sequence += 1
        name = (
            f"{int(now.timestamp() * 1000):013d}-{self.agent_id}-{self._boot}-{self._sequence:06d}"
        )
        return f"{self.cluster_id}/mirror/{migration.id}/{now:%Y/%m/%d}/{name}.seg"
