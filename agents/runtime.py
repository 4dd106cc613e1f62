"""The agent process's life: register, serve, heartbeat, and shut down cleanly.

Start-up order matters: the Kafka socket is bound first (so the port we register is
the one we serve, even with `--kafka-port 0`), then the agent registers, and only then
does it accept connections and print its ready line. Shutdown (SIGINT/SIGTERM): stop
accepting, flush the open segment and wait (at most `SHUTDOWN_FLUSH_S`) for every sealed
one to be answered, write the remaining responses, then exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import socket
import sys
import time
from typing import Any

from agents import AGENT_VERSION, pipeline_samples, record_browser
from agents.browse_channel import BrowseChannel
from agents.chunk_cache import ChunkCache
from agents.client_stats import diagnostics_stats
from agents.config import CLIENT_ROLES, AgentConfig
from agents.context import AgentContext
from agents.control_plane import (
    AgentKeyRejected,
    ControlPlaneClient,
    ControlPlaneError,
    ControlPlaneRejected,
)
from agents.dispatch import REQUESTS_TOTAL, Dispatcher
from agents.groups.coordinator import GroupCoordinator
from agents.groups.ring import AdvertisedListener, Peer, node_id_for
from agents.http_server import build_app, start_http_on
from agents.io_pools import IoPools
from agents.job_runner import JobRunner
from agents.journal_recovery import JournalKeeper
from agents.metrics import Counter, Gauge, Histogram
from agents.migration_copier import MigrationCopier
from agents.partition_offsets import PartitionOffsets
from agents.peers.client import PeerClient, PeerError
from agents.peers.server import add_peer_routes
from agents.pipeline_runner import PipelineRunner, bootstrap_settings
from agents.pipeline_schemas import RegistrySchemas
from agents.read_stats import CountingStore, heartbeat_stats
from agents.s3_loop_puts import LoopPuts
from agents.schema_registry.registry import SchemaRegistry
from agents.schema_registry.server import BasicAuth
from agents.schema_registry.server import build_app as build_registry_app
from agents.schema_registry.validation import SchemaValidator
from agents.security.session import Security
from agents.security.tls import TlsConfigError
from agents.segment_upload import PUTS_IN_FLIGHT
from agents.server import KafkaServer
from agents.tail_feed import FedCommitWatch, TailFeed
from agents.topics import TopicCache
from agents.write_path import CommitWatch, SegmentWriter, file_stats
from agents.zone_cache import ChunkRing, ZoneCache
from core.storage import open_store

log = logging.getLogger("agents")

HEARTBEAT_INTERVAL_S = 3.0
# A peer's hello asks for a heartbeat now; heartbeats stay at least this far apart.
HEARTBEAT_MIN_GAP_S = 0.2
# How long a starting agent waits for its peers to learn of it (`_greet_peers`), and how
# long a peer takes to answer a hello (one heartbeat).
GREET_TIMEOUT_S = 3.0
HELLO_ANSWER_S = 5.0
REGISTER_ATTEMPTS = 5
# SIGTERM waits at most this long for sealed segments to commit (one commit timeout and
# a retry), then fails what is left: the process always ends.
SHUTDOWN_FLUSH_S = 15.0
# SIGTERM gives the pipelines this long to commit their batch and leave their groups.
PIPELINES_STOP_S = 10.0
# After an outage, agents the control plane does not list yet are kept this long: its
# liveness window (FLOE_AGENT_LIVENESS_S, 15 s), within which each has heartbeated again.
LIVENESS_AFTER_OUTAGE_S = 15.0
# /healthz names the journal backlog once its oldest entry is this old (or Ripcord is
# active): before that it is a lightning topic's ordinary wait for its commit.
JOURNAL_BACKLOG_DEGRADED_S = 1.0
_HEARTBEATS = Counter("floe_heartbeats_total", "Heartbeats sent, by outcome.", ("outcome",))
_UP_SINCE = Gauge("floe_agent_start_time_seconds", "Unix time the agent started.")
_LOOP_LAG = Histogram(
    "floe_event_loop_lag_seconds",
    "How late a 100 ms timer fires: time the event loop was busy with other work.",
)


async def _watch_loop_lag(interval_s: float = 0.1) -> None:
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        await asyncio.sleep(interval_s)
        _LOOP_LAG.observe(max(0.0, loop.time() - started - interval_s))


class StartupError(Exception):
    """The agent cannot start; the message is one line for the operator."""


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off (TCP_NODELAY)
    # only on accepted sockets that say they are TCP. With it on, an answer written
    # within a round trip of the one before waited for the client's delayed ACK (40 ms)
    # when the client had nothing to send: the last produce answers of a burst took
    # 290 ms at a 250 ms flush age (bench/lightning.py), not 254.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


class AgentRuntime:
    """Owns every long-lived part of one agent process."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.client = ControlPlaneClient(config.control_plane_url, config.agent_key)
        # Blocking I/O by kind: the write path's PUTs never wait behind the read path's
        # GETs (agents/io_pools.py); one thread more than PUT slots for the journal's
        # marker, PUT beside an entry's (agents/write_path.py).
        self.pools = IoPools(put_threads=PUTS_IN_FLIGHT + 1)
        self.registered = False
        self.ctx: AgentContext | None = None
        self._stop = asyncio.Event()
        self._requests_seen = 0.0
        # `heartbeat_now`: wakes the heartbeat loop, and each round resolves the future
        # that was current when it started (a hello's heartbeat must start after it).
        self._heartbeat_wanted = asyncio.Event()
        self._heartbeat_round: asyncio.Future[None] | None = None
        self._heartbeat_loop_running = False
        self.http_port = 0
        self.registry_port = 0  # the schema-registry role's REST API (0: not served)
        self.peers: PeerClient | None = None
        # Each listener's advertised address once bound (heartbeat `listeners`).
        self.advertised: list[AdvertisedListener] = []

    def request_stop(self) -> None:
        """Begin a clean shutdown (signal handlers call this)."""
        self._stop.set()

    def _unhealthy_reason(self) -> str | None:
        """What /healthz reports: not registered, or commits not going through — unless
        Ripcord keeps produce going while the control plane is away (`_degraded`)."""
        if not self.registered:
            return "not registered"
        if self.ctx is None or self._ripcord_active():
            return None
        return self.ctx.writer.commits_stuck()

    def _ripcord_active(self) -> bool:
        return self.config.ripcord and not self.client.link.up

    def _degraded(self) -> list[str]:
        """What /healthz adds to a healthy answer: Ripcord serving while the control plane
        is away, and what is journaled but not yet sequenced."""
        lines = []
        if self._ripcord_active():
            lines.append(
                f"ripcord active: control plane unreachable for {self.client.link.down_for_s:.0f}s"
            )
        if self.ctx is not None:
            unsequenced, oldest_s = self.ctx.writer.journal_backlog()
            # A lightning topic's entries wait a moment for their commit as a rule.
            if unsequenced and (lines or oldest_s >= JOURNAL_BACKLOG_DEGRADED_S):
                lines.append(
                    f"journal backlog: {int(unsequenced)} bytes not yet sequenced, "
                    f"oldest {oldest_s:.0f}s"
                )
        return lines

    def _heartbeat_body(self, port: int, load: float = 0.0) -> dict[str, Any]:
        primary = self.advertised[0] if self.advertised else None
        return {
            "agent_id": self.config.agent_id,
            "host": primary.host if primary else self.config.advertise_host,
            "port": primary.port if primary else port,
            "listeners": [
                {"name": x.name, "protocol": x.protocol, "host": x.host, "port": x.port}
                for x in self.advertised
            ],
            "agent_group": self.config.agent_group,
            "zone": self.config.zone,
            "load": load,
            "http_port": self.http_port,
            "schema_registry_port": self.registry_port,
            "version": AGENT_VERSION,
            "roles": list(self.config.roles),
            "bucket_url": self.config.bucket_url,
            "stats": {
                **heartbeat_stats(),
                **(self.ctx.tail.stats() if self.ctx and self.ctx.tail else {}),
                **(self._journal_stats()),
                **diagnostics_stats(*file_stats()),
            },
        }

    def _journal_stats(self) -> dict[str, int]:
        """Journaled-but-unsequenced bytes and the oldest entry's age (heartbeat stats)."""
        if self.ctx is None:
            return {}
        pending, age_s = self.ctx.writer.journal_backlog()
        return {"journal_unsequenced_bytes": pending, "journal_oldest_ms": int(age_s * 1000)}

    async def _register(self, port: int) -> dict[str, Any]:
        delay = 0.5
        for attempt in range(REGISTER_ATTEMPTS):
            try:
                return await self.client.call("register", self._heartbeat_body(port), timeout_s=10)
            except AgentKeyRejected:
                raise StartupError(
                    "the control plane rejected the agent key (missing, unknown or revoked)"
                ) from None
            except ControlPlaneRejected as exc:
                raise StartupError(f"registration refused: {exc}") from None
            except ControlPlaneError as exc:
                if attempt == REGISTER_ATTEMPTS - 1:
                    raise StartupError(
                        f"cannot reach the control plane at {self.config.control_plane_url}: {exc}"
                    ) from None
                log.warning("registering failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def _apply_cluster(self, answer: dict[str, Any]) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        ctx.cluster_config = dict(answer["cluster"].get("config") or {})
        self.config.learned.ripcord = ctx.cluster_config.get("ripcord") is True
        ctx.groups.consumer.settings = ctx.cluster_config  # KIP-848 groups' timeouts
        # Only agents that serve clients are brokers, coordinators or cache peers.
        live = [a for a in answer.get("agents") or [] if serves_clients(a)]
        if self.config.ripcord and self.client.link.since_outage_s < LIVENESS_AFTER_OUTAGE_S:
            # Just after an outage the control plane has heard from few agents (their
            # heartbeats failed too): the others it does not list yet are kept, or every
            # client would drop them as brokers — and an idempotent producer's requests
            # in flight to them with them — only to find them again a moment later.
            named = {a.get("agent_id") for a in live}
            live += [a for a in ctx.live_agents if a.get("agent_id") not in named]
        ctx.live_agents = live
        secret = answer.get("peer_secret")
        if isinstance(secret, str) and 0 < len(secret) <= 256:
            ctx.peer_secret = secret
        ctx.groups.live_agents_changed(ctx.live_agents)
        # Every agent feeds the same reported loads (the control plane's) to its leader
        # weights, which change only slowly: Metadata's leaders do not flap.
        ctx.leader_weights.observe(ctx.groups.ring.client_candidates(), time.monotonic())
        # The cluster may cap how long and how large segments get; our flags can only
        # make them smaller.
        age = _positive(ctx.cluster_config.get("max_flush_age_ms"))
        size = _positive(ctx.cluster_config.get("max_flush_bytes"))
        ctx.writer.max_age_ms = min(
            self.config.batch_timeout_ms, age or self.config.batch_timeout_ms
        )
        ctx.writer.max_bytes = min(self.config.batch_max_bytes, size or self.config.batch_max_bytes)

    def _pipeline_bootstrap(self, sasl: bool) -> dict[str, Any]:
        """Where this agent's pipelines connect: its own listener, then the cluster's
        agents (`agents.pipeline_runner.bootstrap_settings`)."""
        own = [(x.name, x.protocol, x.host, x.port) for x in self.advertised]
        live = self.ctx.live_agents if self.ctx is not None else []
        return bootstrap_settings(own, live, sasl=sasl, tls_ca=self.config.tls_cert)

    def _zone_cache_peers(self) -> list[Peer]:
        """The agents sharing this one's cache: the reachable live agents of its zone and
        agent group."""
        ctx = self.ctx
        if ctx is None:
            return []
        zone, group = self.config.zone, self.config.agent_group
        return [
            p
            for p in ctx.groups.ring.candidates()
            if p.zone == zone and p.agent_group == group and p.http_port
        ]

    async def heartbeat_now(self) -> None:
        """Return once a heartbeat that started after this call has ended (answered or
        failed): the live agents it brought are applied. Callers bound the wait."""
        if self._heartbeat_round is None:
            self._heartbeat_round = asyncio.get_running_loop().create_future()
        round_ = self._heartbeat_round
        self._heartbeat_wanted.set()
        await asyncio.shield(round_)

    async def answer_hello(self, agent_id: str) -> dict[str, Any]:
        """A peer that is starting says hello (`/peer/v1/hello`): heartbeat now, so that
        this agent lists it as a broker before it serves a client — librdkafka drops a
        broker another broker's Metadata leaves out, failing what it had in flight to it
        (a consumer's join waited for its lost Metadata answer until its 5-minute refresh).
        Answers whether the peer is now among this agent's live agents."""
        # Before its heartbeat loop runs (it is starting too, greeting its own peers),
        # this agent heartbeats here: two agents starting together wait for nobody.
        beat = (
            self.heartbeat_now()
            if self._heartbeat_loop_running
            else self._heartbeat_once(self.advertised[0].port, HEARTBEAT_INTERVAL_S)
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(beat, HELLO_ANSWER_S)
        live = self.ctx.live_agents if self.ctx is not None else []
        return {"known": any(a.get("agent_id") == agent_id for a in live)}

    async def _greet_peers(self) -> None:
        """Before serving Kafka: each live peer heartbeats now and so lists this agent in
        its Metadata from this agent's first client on (`answer_hello`). Bounded by
        `GREET_TIMEOUT_S`; a peer that does not answer learns of it by its next heartbeat."""
        ctx, peers = self.ctx, self.peers
        if ctx is None or peers is None or not CLIENT_ROLES & set(self.config.roles):
            return  # an agent that serves no clients is nobody's broker: nothing to learn
        others = [p for p in ctx.groups.ring.candidates() if p.agent_id != self.config.agent_id]
        if not others:
            return
        started = time.monotonic()
        deadline = started + GREET_TIMEOUT_S

        async def hello(peer: Peer) -> bool:
            # A peer starting too has registered before it serves its HTTP port: a
            # refused connection is asked again until the deadline.
            while True:
                try:
                    return await peers.hello(peer, max(0.1, deadline - time.monotonic()))
                except PeerError as exc:
                    if exc.reason != "unreachable" or time.monotonic() + 0.1 >= deadline:
                        raise
                await asyncio.sleep(0.1)

        answers = await asyncio.gather(*(hello(p) for p in others), return_exceptions=True)
        unaware = [
            f"{p.agent_id} ({a if isinstance(a, BaseException) else 'does not list it yet'})"
            for p, a in zip(others, answers, strict=True)
            if a is not True
        ]
        took_ms = (time.monotonic() - started) * 1000
        if unaware:
            log.warning(
                "peers not yet aware of this agent after %.0f ms (they learn of it by their "
                "next heartbeat): %s",
                took_ms,
                ", ".join(unaware),
            )
        else:
            log.info("%d peer(s) aware of this agent after %.0f ms", len(others), took_ms)

    async def _heartbeat_loop(self, port: int) -> None:
        self._heartbeat_loop_running = True
        last = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heartbeat_wanted.wait(), HEARTBEAT_INTERVAL_S)
            await asyncio.sleep(max(0.0, last + HEARTBEAT_MIN_GAP_S - time.monotonic()))
            self._heartbeat_wanted.clear()
            round_, self._heartbeat_round = self._heartbeat_round, None
            now = time.monotonic()
            try:
                await self._heartbeat_once(port, now - last)
            finally:
                last = now
                if round_ is not None and not round_.done():
                    round_.set_result(None)

    async def _heartbeat_once(self, port: int, since_last_s: float) -> None:
        # Load: requests per second since the last heartbeat (least-loaded routing).
        seen = REQUESTS_TOTAL.total()
        load = (seen - self._requests_seen) / max(since_last_s, 0.001)
        self._requests_seen = seen
        try:
            answer = await self.client.call(
                "heartbeat", self._heartbeat_body(port, round(load, 2)), timeout_s=5
            )
            self._apply_cluster(answer)
            self.registered = True
            _HEARTBEATS.inc(1, "ok")
        except AgentKeyRejected as exc:
            _HEARTBEATS.inc(1, "rejected")
            self.registered = False
            log.error("heartbeat: %s", exc)
        except ControlPlaneError as exc:
            _HEARTBEATS.inc(1, "error")
            log.warning("heartbeat failed: %s", exc)

    async def run(self) -> None:
        """Serve until asked to stop. Raises `StartupError` when it cannot start."""
        config = self.config
        try:
            store = CountingStore(open_store(config.bucket_url))
        except Exception as exc:
            raise StartupError(f"cannot open bucket {config.bucket_url}: {exc}") from None
        socks: list[socket.socket] = []
        loop_puts: LoopPuts | None = None
        try:
            for listener in config.kafka_listeners:
                socks.append(_bind(listener.host, listener.port))
        except StartupError:
            for bound in socks:
                bound.close()
            raise
        self.advertised = [
            AdvertisedListener(
                listener.name,
                listener.protocol,
                listener.advertised_host,
                listener.advertised_port or bound.getsockname()[1],
            )
            for listener, bound in zip(config.kafka_listeners, socks, strict=True)
        ]
        port = self.advertised[0].port
        # Bound before registering too: peers reach this agent's cache on it.
        try:
            http_sock = _bind(config.host, config.http_port)
        except StartupError:
            for bound in socks:
                bound.close()
            raise
        self.http_port = http_sock.getsockname()[1]
        registry_sock: socket.socket | None = None
        if "schema-registry" in config.roles:
            try:
                registry_sock = _bind(config.host, config.schema_registry_port)
            except StartupError:
                for bound in socks:
                    bound.close()
                http_sock.close()
                raise
        http_runner = None
        registry_runner = None
        servers: list[KafkaServer] = []
        heartbeat: asyncio.Task[None] | None = None
        lag_watch: asyncio.Task[None] | None = None
        tail_feed: asyncio.Task[None] | None = None
        journals: asyncio.Task[None] | None = None
        jobs: asyncio.Task[None] | None = None
        migrations: asyncio.Task[None] | None = None
        browse_polls: asyncio.Task[None] | None = None
        pipelines: asyncio.Task[None] | None = None
        pipeline_runner: PipelineRunner | None = None
        job_runner: JobRunner | None = None
        try:
            try:
                securities = Security.for_listeners(config, self.client)
            except TlsConfigError as exc:
                raise StartupError(str(exc)) from None
            answer = await self._register(port)
            cluster_id = answer["cluster"]["id"]
            # Fetch-serving agents' own commits wake through the tail feed (FedCommitWatch).
            watch = FedCommitWatch() if CLIENT_ROLES & set(config.roles) else CommitWatch()
            offsets = PartitionOffsets()
            # Group relays use the peer channel even when the zone cache is off.
            self.peers = PeerClient(
                config.agent_id, lambda: self.ctx.peer_secret if self.ctx is not None else None
            )
            cache = ZoneCache(
                store,
                ChunkCache(
                    max_bytes=config.cache_bytes,
                    copy_bytes=config.cache_copy_bytes,
                    chunk_bytes=config.cache_chunk_bytes,
                ),
                ring=ChunkRing(config.agent_id),
                peers=self.peers if config.zone_cache else None,
                zone_peers=self._zone_cache_peers,
                executor=self.pools.read,
                peer_timeout_s=config.peer_timeout_ms / 1000,
            )
            loop_puts = LoopPuts.for_store(store)
            writer = SegmentWriter(
                put=store.put,
                put_from_loop=loop_puts.put if loop_puts is not None else None,
                client=self.client,
                cluster_id=cluster_id,
                agent_id=config.agent_id,
                max_bytes=config.batch_max_bytes,
                max_age_ms=config.batch_timeout_ms,
                executor=self.pools.put,
                on_written=cache.insert_file,
                watch=watch,
                offsets=offsets,
                # Ripcord (the agent's flag or the cluster's setting, as last learned):
                # every segment is a journal entry, answered without the control plane
                # when it does not answer in time.
                ripcord=lambda: config.ripcord,
            )
            journal_keeper = JournalKeeper(
                self.client,
                store,
                cluster_id=cluster_id,
                agent_id=config.agent_id,
                journal=writer.journal,
                live_agents=lambda: {
                    str(a.get("agent_id")) for a in (self.ctx.live_agents if self.ctx else [])
                },
                executor=self.pools.io,
                journaling=lambda: writer.journal_started,
                on_gap=writer.hold_after_gap,
            )
            me = Peer(
                config.agent_id,
                self.advertised[0].host,
                port,
                node_id_for(config.agent_id),
                zone=config.zone,
                http_port=self.http_port,
                agent_group=config.agent_group,
                listeners=tuple(self.advertised),
            )
            ctx = self.ctx = AgentContext(
                config=config,
                client=self.client,
                topics=TopicCache(self.client),
                writer=writer,
                cache=cache,
                watch=watch,
                offsets=offsets,
                cluster_id=cluster_id,
                node_id=me.node_id,
                port=port,
                groups=GroupCoordinator.start_for(me, self.client),
            )
            # Ripcord: groups keep their coordinator through a control-plane outage, and
            # topic lookups answer from the cache without waiting on a down link.
            ctx.groups.leases.keep_through_outage = lambda: config.ripcord
            ctx.topics.keep_through_outage = lambda: config.ripcord
            # Every agent validates produce for topics that ask (schema-registry role or not).
            registry = SchemaRegistry(
                self.client,
                store,
                cluster_id=cluster_id,
                executor=self.pools.io,
                id_ttl_s=config.schema_cache_s,
            )
            ctx.schema_validator = SchemaValidator(registry)
            self._apply_cluster(answer)
            self.registered = True

            ctx.peers = self.peers
            dispatcher = Dispatcher(ctx)
            app = build_app(self._unhealthy_reason, self._degraded)
            add_peer_routes(
                app,
                secret=lambda: ctx.peer_secret,
                cluster_prefix=cluster_id + "/",
                chunk_bytes=config.cache_chunk_bytes,
                serve_chunk=cache.serve_peer,
                relay=dispatcher.relayed,
                hello=self.answer_hello,
            )
            if "pipelines" in config.roles:
                # HTTP-input pipelines take records from the cluster's SASL users when the
                # agent asks Kafka clients to log in (as the Schema Registry does).
                credentials = securities[0].credentials
                pipeline_auth = None
                if config.require_sasl and credentials is not None:
                    pipeline_auth = BasicAuth(credentials).check
                pipeline_runner = PipelineRunner(
                    self.client,
                    agent_id=config.agent_id,
                    store=open_store(config.bucket_url),
                    bootstrap=self._pipeline_bootstrap,
                    http_auth=pipeline_auth,
                    schemas=RegistrySchemas(registry, asyncio.get_running_loop()),
                )
                pipeline_runner.add_routes(app)  # HTTP-input pipelines' records
            http_runner = await start_http_on(app, http_sock)
            # Peers learn of this agent (and can reach its HTTP port) before any client
            # of it does: every agent's Metadata lists the same brokers.
            await self._greet_peers()
            for advertised, bound, security in zip(self.advertised, socks, securities, strict=True):
                server = KafkaServer(
                    dispatcher, max_frame_bytes=config.max_request_bytes, security=security
                )
                servers.append(server)
                log.info(
                    "Kafka listener %s on %s:%d, advertised as %s:%d, security protocol: %s",
                    advertised.name,
                    bound.getsockname()[0],
                    bound.getsockname()[1],
                    advertised.host,
                    advertised.port,
                    security.protocol,
                )
                await server.start_on(bound)
            if registry_sock is not None:
                auth = None
                credentials = securities[0].credentials
                if config.require_sasl and credentials is not None:
                    auth = BasicAuth(credentials)
                registry_port = self.registry_port = registry_sock.getsockname()[1]
                registry_runner = await start_http_on(
                    build_registry_app(
                        registry, auth, registrations_per_s=config.schema_registry_rate
                    ),
                    registry_sock,
                )
                registry_sock = None
                log.info("schema registry on http://%s:%d/", config.host, registry_port)
            http_port = self.http_port
            heartbeat = asyncio.get_running_loop().create_task(self._heartbeat_loop(port))
            if CLIENT_ROLES & set(config.roles):  # an agent that takes produce journals
                journals = asyncio.get_running_loop().create_task(journal_keeper.run_forever())
            lag_watch = asyncio.get_running_loop().create_task(_watch_loop_lag())
            if CLIENT_ROLES & set(config.roles):  # an agent that serves Fetch
                ctx.tail = TailFeed(self.client, watch)
                ctx.tail.keep_through_outage = lambda: config.ripcord
                tail_feed = asyncio.get_running_loop().create_task(ctx.tail.run_forever())
            browsing = BrowseChannel(
                self.client,
                agent_id=config.agent_id,
                browse=functools.partial(record_browser.browse, ctx),
                schema_document=registry.document,
                pipeline_dry_run=functools.partial(pipeline_samples.dry_run_answer, ctx),
            )
            browse_polls = asyncio.get_running_loop().create_task(browsing.run_forever())
            if "jobs" in config.roles:
                job_runner = JobRunner(
                    self.client,
                    open_store(config.bucket_url),
                    agent_id=config.agent_id,
                    bucket_url=config.bucket_url,
                    spark_master=config.spark_master,
                    lease_s=config.job_lease_s,
                )
                jobs = asyncio.get_running_loop().create_task(job_runner.run_forever())
                # Migrations from another Kafka (issue 30): copied beside the Spark jobs.
                copier = MigrationCopier(
                    self.client,
                    open_store(config.bucket_url),
                    agent_id=config.agent_id,
                    cluster_id=cluster_id,
                    lease_s=config.migration_lease_s,
                )
                migrations = asyncio.get_running_loop().create_task(copier.run_forever())
            if pipeline_runner is not None:
                pipelines = asyncio.get_running_loop().create_task(pipeline_runner.run_forever())
            _UP_SINCE.set(time.time())
            log.info("agent group %s", config.agent_group)
            log.info("metrics and health on http://%s:%d/", config.host, http_port)
            print(
                f"agent {config.agent_id} serving Kafka on {self.advertised[0].host}:{port} "
                f"for cluster {cluster_id}",
                flush=True,
            )
            await self._stop.wait()
            log.info("shutting down: flushing the open segment")
            for server in servers:
                server.stop_accepting()
            if pipeline_runner is not None:
                if pipelines is not None:
                    pipelines.cancel()
                # Each pipeline commits what it processed and leaves its group while this
                # agent still serves Kafka (its own clients may be connected to it).
                # Bounded: a transaction left open is aborted by the partition's next
                # owner (its init_transactions), so giving up loses nothing.
                try:
                    await asyncio.wait_for(pipeline_runner.close(), PIPELINES_STOP_S)
                except TimeoutError:
                    log.warning(
                        "shutting down: pipelines still stopping after %.0fs", PIPELINES_STOP_S
                    )
            try:
                # Bounded: a control plane that never answers must not keep us alive.
                await asyncio.wait_for(writer.close(), SHUTDOWN_FLUSH_S)
                await journal_keeper.close(all_sequenced=writer.journal_backlog()[0] == 0)
            except TimeoutError:
                log.error(
                    "shutting down: segments still uncommitted after %.0fs; their "
                    "requests are failed",
                    SHUTDOWN_FLUSH_S,
                )
                writer.abandon()
            await ctx.groups.close()
            for server in servers:
                await server.close_connections()
        finally:
            for task in (
                heartbeat,
                lag_watch,
                jobs,
                migrations,
                browse_polls,
                pipelines,
                tail_feed,
                journals,
            ):
                if task is not None:
                    task.cancel()
            if job_runner is not None:
                job_runner.close()
            for server in servers:
                server.stop_accepting()
            for bound in socks[len(servers) :]:
                bound.close()
            if http_runner is not None:
                await http_runner.cleanup()
            elif http_sock is not None:
                http_sock.close()
            if registry_runner is not None:
                await registry_runner.cleanup()
            elif registry_sock is not None:
                registry_sock.close()
            if self.peers is not None:
                await self.peers.close()
            await self.client.close()
            if loop_puts is not None:
                await loop_puts.close()
            self.pools.shutdown()


def serves_clients(agent: dict[str, Any]) -> bool:
    """Whether a live agent serves Kafka clients (produce or consume; an agent that
    reports no roles predates them and does everything)."""
    roles = agent.get("roles") or CLIENT_ROLES
    return bool(CLIENT_ROLES & set(roles))


def _positive(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


async def run_agent(config: AgentConfig) -> None:
    """Run one agent until SIGINT/SIGTERM."""
    runtime = AgentRuntime(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, runtime.request_stop)
    await runtime.run()


def configure_logging(level: str) -> None:
    """One line per event on stderr (stdout carries only the ready line)."""
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
