"""The `pipelines` role: run the cluster's managed pipelines (docs/PIPELINES.md).

Every `POLL_S` the agent asks the control plane which pipelines run
(`pipelines/assignments`): each running one with a Kafka input gets a thread here
(`agents.pipeline_worker`), its consumer group sharing the input partitions with the
other pipelines-role agents; one with an HTTP input answers
`POST /pipelines/v1/<name>/records` on this agent's HTTP port. A pipeline paused or
deleted is stopped (its thread commits and leaves the group); a new version is handed
to its thread, which switches between two batches. Every `REPORT_S` the counters go
back (`pipelines/report`). Every call is bounded; a control plane that does not answer
leaves the pipelines running as last assigned.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web
from confluent_kafka import KafkaException, Producer

from agents.control_plane import ControlPlaneClient, ControlPlaneError, ControlPlaneRejected
from agents.pipeline_sinks import HttpPoster, OutputError, json_line
from agents.pipeline_transactions import CLIENT_TIMEOUT_S
from agents.pipeline_worker import (
    Assignment,
    KafkaPipelineWorker,
    PipelineStats,
    client_settings,
)
from core.pipelines import (
    BucketOutput,
    ConfigError,
    HttpInput,
    HttpOutput,
    InRecord,
    KafkaOutput,
    RecordError,
    SchemaSource,
    compile_spec,
    parse_config,
)
from core.storage import ObjectStore

log = logging.getLogger(__name__)

POLL_S = 3.0
REPORT_S = 2.0
CALL_TIMEOUT_S = 10.0
STOP_JOIN_S = 40.0  # a stopping thread commits its batch first (bounded by its calls)
HTTP_MAX_BODY = 8 * 1024 * 1024
HTTP_MAX_RECORDS = 10_000


def bootstrap_settings(
    own: Iterable[tuple[str, str, str, int]],
    live_agents: Iterable[dict[str, Any]],
    *,
    sasl: bool,
    tls_ca: str | None = None,
) -> dict[str, Any]:
    """Where a pipeline's Kafka clients connect: this agent's own listener first, then
    the cluster's live agents' listeners of the same kind. `own` are this agent's
    listeners (name, protocol, host, port); with credentials a SASL listener is chosen,
    without one that takes none (else the first)."""
    mine = list(own)
    wanted = ("SASL_PLAINTEXT", "SASL_SSL") if sasl else ("PLAINTEXT", "SSL")
    chosen = next((x for w in wanted for x in mine if x[1] == w), mine[0])
    name, protocol = chosen[0], chosen[1]
    servers = [f"{chosen[2]}:{chosen[3]}"]
    for agent in live_agents:
        for listener in agent.get("listeners") or []:
            if listener.get("name") == name and listener.get("protocol") == protocol:
                address = f"{listener.get('host')}:{listener.get('port')}"
                if address not in servers:
                    servers.append(address)
    settings: dict[str, Any] = {
        "bootstrap.servers": ",".join(servers),
        "security.protocol": protocol.lower(),
    }
    if protocol.endswith("SSL") and tls_ca:
        settings["ssl.ca.location"] = tls_ca
    return settings


class HttpInputPipeline:
    """A pipeline whose records are POSTed to this agent: each request's records go
    through the engine and its outputs before the answer (at-least-once: a client that
    retries after a lost answer sends them again)."""

    def __init__(
        self,
        assignment: Assignment,
        *,
        bootstrap: Callable[[bool], dict[str, Any]],
        store: ObjectStore | None,
        agent_id: str,
        schemas: SchemaSource | None = None,
    ) -> None:
        self.schemas = schemas
        self.assignment = assignment
        self.agent_id = agent_id
        self.stats = PipelineStats(assignment.name, version=assignment.version)
        self._bootstrap = bootstrap
        self._store = store
        self._lock = threading.Lock()  # one request at a time through the engine's state
        self._producer: Producer | None = None
        self._sequence = 0
        self._stopping = threading.Event()
        self._load(assignment)

    def _load(self, assignment: Assignment) -> None:
        self.spec = parse_config(assignment.config)
        self.compiled = compile_spec(self.spec, self.schemas)
        self.assignment = assignment
        self.stats.version = assignment.version
        self.posters = {
            name: HttpPoster(o.url, timeout_s=o.timeout_seconds, stopping=self._stopping)
            for name, o in self.spec.outputs.items()
            if isinstance(o, HttpOutput)
        }

    def update(self, assignment: Assignment) -> None:
        with self._lock:
            if assignment.credentials != self.assignment.credentials:
                self._close_producer()
            self._load(assignment)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            self._close_producer()
        self.stats.state = "stopped"

    def _close_producer(self) -> None:
        if self._producer is not None:
            self._producer.flush(CLIENT_TIMEOUT_S)
            self._producer = None

    def handle(self, values: list[bytes]) -> dict[str, Any]:
        """Run the records through the engine and every output; the counts."""
        with self._lock:
            return self._handle(values)

    def _handle(self, values: list[bytes]) -> dict[str, Any]:
        now = int(time.time() * 1000)
        self._sequence += 1
        request = f"{self.agent_id}-{now}-{self._sequence}"
        records = [InRecord("", 0, i, now, None, v, ()) for i, v in enumerate(values)]
        self.stats.count("in", len(records))
        results = self.compiled.process_batch(records)
        producer = self._kafka_producer() if self._needs_kafka() else None
        lines: dict[str, list[bytes]] = {}
        out = dead = filtered = 0
        failures: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(str(err))

        for rec, result in zip(records, results):
            if isinstance(result, RecordError):
                if self.spec.dead_letter is None or producer is None:
                    filtered += 1
                    self.stats.error(f"record {rec.offset}: {result.message}")
                    continue
                letter = self.compiled.dead_letter_record(rec, result)
                producer.produce(
                    self.spec.dead_letter.topic,
                    value=letter.value,
                    key=letter.key,
                    headers=list(letter.headers) or None,
                    on_delivery=delivered,
                )
                dead += 1
                continue
            if not result:
                filtered += 1
            for emit in result:
                output = self.spec.outputs.get(emit.output)
                if isinstance(output, KafkaOutput) and producer is not None:
                    producer.produce(
                        output.topic,
                        value=emit.value,
                        key=emit.key,
                        headers=list(emit.headers) or None,
                        on_delivery=delivered,
                    )
                elif isinstance(output, BucketOutput):
                    lines.setdefault(emit.output, []).append(
                        json_line(
                            topic="",
                            partition=0,
                            offset=rec.offset,
                            timestamp_ms=emit.timestamp_ms,
                            key=emit.key,
                            value=emit.value,
                            headers=emit.headers,
                        )
                    )
                elif isinstance(output, HttpOutput):
                    self.posters[emit.output].post(
                        emit.value or b"",
                        {
                            "Content-Type": "application/json",
                            "Floe-Source": f"{request}/{rec.offset}",
                        },
                    )
                out += 1
        for name, output_lines in lines.items():
            output = self.spec.outputs[name]
            assert isinstance(output, BucketOutput)
            if self._store is None:
                raise OutputError("this agent has no bucket for a bucket output")
            key = f"{output.prefix}{self.assignment.name}/http/{request}.jsonl"
            try:
                self._store.put(key, b"".join(output_lines))
            except Exception as exc:
                raise OutputError(f"bucket PUT failed: {exc}") from exc
        if producer is not None and producer.flush(CLIENT_TIMEOUT_S):
            failures.append("records not delivered in time")
        if failures:
            raise OutputError(f"the Kafka output refused records: {failures[0]}")
        self.stats.count("out", out)
        self.stats.count("dead_lettered", dead)
        self.stats.count("filtered", filtered)
        return {"records": len(records), "out": out, "dead_lettered": dead, "filtered": filtered}

    def _needs_kafka(self) -> bool:
        return self.spec.dead_letter is not None or any(
            isinstance(o, KafkaOutput) for o in self.spec.outputs.values()
        )

    def _kafka_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(
                {
                    **client_settings(self.assignment, self._bootstrap),
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000),
                }
            )
        return self._producer


def parse_posted(body: bytes, content_type: str) -> list[bytes]:
    """A POSTed body as record values: a JSON array (each element one record) or JSON
    lines (each non-empty line one record, its bytes as sent). ValueError if neither."""
    text = body.strip()
    if not text:
        return []
    if text.startswith(b"["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"not a JSON array: {exc}") from None
        if not isinstance(items, list):
            raise ValueError("not a JSON array")
        return [json.dumps(i, separators=(",", ":")).encode() for i in items]
    lines = [line.strip() for line in text.split(b"\n")]
    values = [line for line in lines if line]
    for number, line in enumerate(values, 1):
        try:
            json.loads(line)
        except ValueError as exc:
            raise ValueError(f"line {number} is not JSON: {exc}") from None
    return values


class PipelineRunner:
    """`await runner.run_forever()`; `add_routes(app)` before the HTTP port serves."""

    def __init__(
        self,
        client: ControlPlaneClient,
        *,
        agent_id: str,
        store: ObjectStore | None,
        bootstrap: Callable[[bool], dict[str, Any]],
        http_auth: Callable[[str], Awaitable[bool]] | None = None,
        schemas: SchemaSource | None = None,
        poll_s: float = POLL_S,
        report_s: float = REPORT_S,
    ) -> None:
        self.client = client
        self.agent_id = agent_id
        self.store = store
        self.bootstrap = bootstrap
        # HTTP input: None, or basic auth checked against the cluster's SASL users.
        self.http_auth = http_auth
        self.schemas = schemas  # the Avro processors' (the agent's Schema Registry)
        self.poll_s = poll_s
        self.report_s = report_s
        self.kafka: dict[str, KafkaPipelineWorker] = {}
        self.http: dict[str, HttpInputPipeline] = {}
        self.broken: dict[str, PipelineStats] = {}  # assignments that do not even parse
        self.finished: dict[str, PipelineStats] = {}  # stopped: reported once more
        self._said_missing = False

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/pipelines/v1/{name}/records", self._receive)

    async def run_forever(self) -> None:
        reporting = asyncio.get_running_loop().create_task(self._report_forever())
        try:
            while True:
                await self.poll_once()
                await asyncio.sleep(self.poll_s)
        finally:
            reporting.cancel()  # the runtime calls close() while Kafka is still served

    async def poll_once(self) -> None:
        try:
            answer = await self.client.call(
                "pipelines/assignments", {"agent_id": self.agent_id}, timeout_s=CALL_TIMEOUT_S
            )
        except ControlPlaneRejected as exc:
            if not self._said_missing:
                log.warning("pipelines/assignments refused: %s", exc)
                self._said_missing = True
            return
        except ControlPlaneError as exc:
            log.warning("pipelines/assignments failed: %s", exc)
            return
        items = answer.get("pipelines")
        if isinstance(items, list):
            await self.apply([i for i in items if isinstance(i, dict)])

    async def apply(self, items: list[dict[str, Any]]) -> None:
        """Start, switch and stop pipelines to match what the control plane assigns."""
        wanted: dict[str, Assignment] = {}
        for item in items:
            try:
                assignment = Assignment.from_answer(item)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("pipelines/assignments: a bad entry (%s)", exc)
                continue
            if item.get("state", "running") == "running":
                wanted[assignment.id] = assignment
        for pid in [p for p in (*self.kafka, *self.http) if p not in wanted]:
            await self._stop(pid)
        for pid in [p for p in self.broken if p not in wanted]:
            del self.broken[pid]
        for pid, assignment in wanted.items():
            current = self._current(pid)
            if current is not None and _same(current, assignment):
                continue
            try:
                spec = parse_config(assignment.config)
            except ConfigError as exc:
                self._failing(pid, assignment, str(exc))
                continue
            self.finished.pop(pid, None)
            http_input = isinstance(spec.input, HttpInput)
            if current is not None and (pid in self.http) == http_input:
                await self._update(pid, assignment)
                continue
            if current is not None:
                await self._stop(pid)
            log.info("pipeline %s: starting version %d", assignment.name, assignment.version)
            if http_input:
                try:
                    self.http[pid] = HttpInputPipeline(
                        assignment,
                        bootstrap=self.bootstrap,
                        store=self.store,
                        agent_id=self.agent_id,
                        schemas=self.schemas,
                    )
                    self.broken.pop(pid, None)
                except Exception as exc:
                    self._failing(pid, assignment, f"{type(exc).__name__}: {exc}")
            else:
                self.broken.pop(pid, None)
                worker = KafkaPipelineWorker(
                    assignment,
                    bootstrap=self.bootstrap,
                    store=self.store,
                    agent_id=self.agent_id,
                    schemas=self.schemas,
                )
                self.kafka[pid] = worker
                worker.start()

    def _failing(self, pid: str, assignment: Assignment, message: str) -> None:
        """An assigned pipeline this agent cannot run: reported failing, its error once."""
        stats = self.broken.setdefault(
            pid, PipelineStats(assignment.name, version=assignment.version)
        )
        stats.version, stats.state = assignment.version, "failing"
        if not stats.errors or stats.errors[-1]["message"] != message[:1000]:
            stats.error(message)

    def _current(self, pid: str) -> Assignment | None:
        if pid in self.kafka:
            return self.kafka[pid].latest_assignment()
        if pid in self.http:
            return self.http[pid].assignment
        return None

    async def _update(self, pid: str, assignment: Assignment) -> None:
        log.info("pipeline %s: version %d assigned", assignment.name, assignment.version)
        if pid in self.kafka:
            self.kafka[pid].update(assignment)
        else:
            try:
                await asyncio.get_running_loop().run_in_executor(
                    None, self.http[pid].update, assignment
                )
            except Exception as exc:
                self.http[pid].stats.error(f"{type(exc).__name__}: {exc}")

    async def _stop(self, pid: str) -> None:
        loop = asyncio.get_running_loop()
        if pid in self.kafka:
            worker = self.kafka.pop(pid)
            log.info("pipeline %s: stopping", worker.assignment.name)
            worker.stop()
            await loop.run_in_executor(None, worker.join, STOP_JOIN_S)
            self.finished[pid] = worker.stats
        elif pid in self.http:
            pipeline = self.http.pop(pid)
            await loop.run_in_executor(None, pipeline.stop)
            self.finished[pid] = pipeline.stats

    async def close(self) -> None:
        """Stop every pipeline (each commits what it processed and leaves its group),
        all at once: the slowest one bounds the wait, not their sum."""
        for worker in self.kafka.values():
            worker.stop()
        await asyncio.gather(*(self._stop(pid) for pid in [*self.kafka, *self.http]))

    def report_body(self) -> dict[str, Any]:
        reports = [w.stats.report(pid) for pid, w in self.kafka.items()]
        reports += [p.stats.report(pid) for pid, p in self.http.items()]
        reports += [s.report(pid) for pid, s in self.broken.items()]
        reports += [s.report(pid) for pid, s in self.finished.items()]
        return {"agent_id": self.agent_id, "pipelines": reports}

    async def _report_forever(self) -> None:
        while True:
            await asyncio.sleep(self.report_s)
            body = self.report_body()
            if not body["pipelines"]:
                continue
            try:
                await self.client.call("pipelines/report", body, timeout_s=CALL_TIMEOUT_S)
                self.finished.clear()  # their last counters are the control plane's now
            except ControlPlaneError as exc:
                log.info("pipelines/report failed: %s", exc)

    async def _receive(self, request: web.Request) -> web.Response:
        if self.http_auth is not None and not await self.http_auth(
            request.headers.get("Authorization", "")
        ):
            return web.json_response(
                {"error": "log in with one of the cluster's SASL users (HTTP basic auth)"},
                status=401,
                headers={"WWW-Authenticate": 'Basic realm="floe-pipelines"'},
            )
        name = request.match_info["name"]
        pipeline = next((p for p in self.http.values() if p.assignment.name == name), None)
        if pipeline is None:
            return _error(404, f"no running pipeline {name!r} with an HTTP input on this agent")
        if request.content_length is not None and request.content_length > HTTP_MAX_BODY:
            return _error(413, f"the body is over {HTTP_MAX_BODY} bytes")
        body = bytearray()
        async for chunk in request.content.iter_chunked(1 << 16):
            body += chunk
            if len(body) > HTTP_MAX_BODY:
                return _error(413, f"the body is over {HTTP_MAX_BODY} bytes")
        try:
            values = parse_posted(bytes(body), request.content_type)
        except ValueError as exc:
            return _error(400, str(exc))
        if len(values) > HTTP_MAX_RECORDS:
            return _error(413, f"over {HTTP_MAX_RECORDS} records in one request")
        try:
            answer = await asyncio.get_running_loop().run_in_executor(None, pipeline.handle, values)
        except (OutputError, KafkaException) as exc:
            pipeline.stats.error(str(exc))
            return _error(503, f"an output did not take the records: {exc}")
        return web.json_response(answer)


def _same(a: Assignment, b: Assignment) -> bool:
    return (a.version, a.config, a.credentials) == (b.version, b.config, b.credentials)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
