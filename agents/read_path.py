"""The read path behind Fetch (``handlers/fetch.py``): one plan for all requested
partitions — from the tail index when it holds them all (``tail_feed``, issue 28), else
one `fetch-plan` call —, byte ranges read through the chunk cache, each batch's
baseOffset rewritten to its assigned offset, and a long poll that wakes on this agent's
commits and the tail feed's runs (or, without a live feed, on a periodic re-plan).

The plan names partition runs (one index row: a partition's consecutive batches in one
file); each run is walked batch by batch (``core.segment.run_batches``) once and the walk
shared by every Fetch that reads the run (``_walked``: consumers of every group at the
tail read the same newest runs): a response's records are views into one copy of the
run's bytes plus a 16-byte rewritten prefix per batch (baseOffset, batchLength and
partitionLeaderEpoch, none of which the CRC covers — KIP-98), and a Fetch finds the
batches it may send by bisection, not by walking them again.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import struct
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from agents import shared_answers
from agents.context import AgentContext
from agents.control_plane import ControlPlaneError, ControlPlaneUnavailable
from agents.metrics import Counter, Histogram, long_poll_waited
from agents.read_stats import CONSUMED, count_client_bytes
from agents.tail_feed import PLANS
from agents.topics import TopicInfo
from core.kafka.errors import ErrorCode
from core.kafka.records import RecordInput, encode_batch
from core.segment import run_batches

log = logging.getLogger(__name__)

# Without the tail feed other agents' commits are not announced to us, so a waiting fetch
# re-plans this often; with it, every commit is (the longer bound is only a safety net).
REPLAN_INTERVAL_S = 0.1
FED_REPLAN_INTERVAL_S = 1.0
# How long a Fetch waits for an identical one's answer being built (shared_answers)
# before it builds its own: a build is one plan, reads and an encode.
_BUILD_WAIT_S = 5.0
_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_LEADER_EPOCH = 0  # Floe has no leader changes; Metadata says epoch 0 too
_MARKER_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch

_PLAN_SECONDS = Histogram("floe_fetch_plan_seconds", "Latency of fetch-plan calls.")
_READ_ERRORS = Counter("floe_fetch_read_errors_total", "Batches that could not be read.")
_WAKES = Counter(
    "floe_fetch_wakes_total",
    "Long-polling Fetches woken by a commit or the tail feed, by what their re-plan found"
    " (records, or empty: nothing new to send).",
    ("outcome",),
)


def partition_answer(index: int, error: int = 0) -> dict[str, Any]:
    """A Fetch answer for one partition, empty until filled (or with `error`)."""
    return {
        "partition_index": index,
        "error_code": error,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


class Wanted:
    """One requested partition and the answer being built for it."""

    __slots__ = (
        "info",
        "partition",
        "offset",
        "max_bytes",
        "answer",
        "sent_bytes",
        "sent_records",
        "sent_end",
        "read_short",
    )

    def __init__(self, info: TopicInfo, request: dict[str, Any]) -> None:
        self.info = info
        self.partition = request["partition"]
        self.offset = request["fetch_offset"]
        self.max_bytes = request["partition_max_bytes"]
        self.answer = partition_answer(self.partition)
        # What the last assembly put in the answer: record batch bytes and records, and
        # whether a run it read failed part-way (what came before the fault is sent).
        self.sent_bytes = self.sent_records = 0
        self.sent_end = self.offset  # the offset after the last record put in the answer
        self.read_short = False


async def fill(
    ctx: AgentContext,
    wanted: list[Wanted],
    body: dict[str, Any],
    client_zone: str | None = None,
    *,
    consumed: bool = True,
    share: tuple[tuple[Hashable, Hashable], Callable[[], bytes]] | None = None,
) -> bytes | None:
    """Fill the answers of `wanted` from fetch plans, long-polling as the Fetch `body`
    asks (`max_wait_ms`, `min_bytes`), within its `max_bytes`. The bytes sent are
    counted by `client_zone`, the zone the client named (None: none), and, when
    `consumed` (a consumer's Fetch, not the console's browser), by topic (throughput out).

    `share`: the request's keys (as sent, and sorted) and how to encode its answer once
    `wanted` is filled (``shared_answers``). An identical Fetch's answer at the same tail
    is then taken as is (or, while one is being built, waited for once), and an answer
    planned from the tail index is encoded and kept for the next ones; either way the
    encoded body is returned (else None: the answers are in `wanted`)."""
    max_bytes = body.get("max_bytes", 0x7FFFFFFF)
    min_bytes = body.get("min_bytes", 1)
    deadline = time.monotonic() + max(body.get("max_wait_ms", 0), 0) / 1000
    isolation_level = 1 if body.get("isolation_level") == 1 else 0
    read_committed = isolation_level == 1
    plan_request: dict[str, Any] | None = None  # made when first needed (not at the tail)
    keys = [(w.info.topic_id_str, w.partition) for w in wanted]
    positions = [(key, w.offset) for key, w in zip(keys, wanted, strict=True)]
    tail = ctx.tail
    woken = waited = False
    while True:
        seen = ctx.watch.snapshot(keys)
        planned = None
        states = None  # the tail index's state the plan came from (a shareable answer)
        building = None  # this Fetch builds the answer identical ones wait for
        if tail is not None:
            if share is not None and (hit := tail.shared_answer(share[0])) is not None:
                PLANS.inc(1, "tail_index")
                if woken:
                    _WAKES.inc(1, "records")
                _count_sent(ctx, hit.total, hit.consumed, client_zone, consumed)
                return hit.body
            if share is not None and not waited and tail.live:
                pending = tail.shared.pending(share[0])
                if pending is not None:  # an identical Fetch is building it: take its answer
                    waited = True
                    await asyncio.wait([pending], timeout=_BUILD_WAIT_S)
                    continue
            if (remaining := deadline - time.monotonic()) > 0 and tail.at_end(
                positions, read_committed
            ):
                # Every consumer at the tail asks again right after its answer: nothing
                # to plan, read or encode until the next commit or run of a partition.
                if woken:
                    _WAKES.inc(1, "empty")
                woken = await _wait(ctx, keys, remaining, seen)
                continue
            plan_request = plan_request or _plan_request(wanted, max_bytes, isolation_level)
            planned = tail.plan(plan_request["partitions"], max_bytes, isolation_level)
            if planned is not None and share is not None:
                states = shared_answers.snapshot(tail.index, keys)
                if states is not None:
                    building = tail.shared.building(share[0])
        from_tail = planned is not None
        if planned is not None:
            PLANS.inc(1, "tail_index")
        else:
            PLANS.inc(1, "control_plane")
            started = time.perf_counter()
            plan_request = plan_request or _plan_request(wanted, max_bytes, isolation_level)
            try:
                planned = (await _shared_plan(ctx, plan_request))["partitions"]
            except ControlPlaneError as exc:
                log.warning("fetch-plan failed: %s", exc)
                for w in wanted:
                    w.answer["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                return None
            finally:
                _PLAN_SECONDS.observe(time.perf_counter() - started)
        try:
            total, errors = await _assemble(
                ctx,
                wanted,
                planned,
                max_bytes,
                read_committed,
                shared=from_tail,
            )
            if woken:
                _WAKES.inc(1, "records" if total else "empty")
            remaining = deadline - time.monotonic()
            if total >= min_bytes or errors or remaining <= 0:
                sent = tuple(
                    (w.info.topic_id_str, w.sent_bytes, w.sent_records)
                    for w in wanted
                    if w.sent_bytes
                )
                _count_sent(ctx, total, sent, client_zone, consumed)
                if (
                    share is not None
                    and tail is not None
                    and states is not None
                    and total >= max(min_bytes, 1)
                    and not errors
                    and not any(w.read_short for w in wanted)
                ):
                    encoded = share[1]()
                    # Whole to every partition's end: the same in any order (sorted key).
                    key = share[0][1] if _whole(wanted, read_committed) else share[0][0]
                    tail.shared.put(key, shared_answers.Answer(encoded, states, sent, total))
                    return encoded
                return None
        finally:
            if building is not None and tail is not None and share is not None:
                tail.shared.built(share[0], building)
        woken = await _wait(ctx, keys, remaining, seen)


async def _wait(
    ctx: AgentContext, keys: list[tuple[str, int]], remaining: float, seen: tuple[int, ...]
) -> bool:
    """Wait at most `remaining` seconds for a commit to one of the partitions `keys` since
    the snapshot `seen`: at once when this agent commits to one, or the tail feed brings
    a run of one (any agent's commit); without a live feed, look again shortly, since
    another agent may have committed. True when woken by one."""
    tail = ctx.tail
    interval = FED_REPLAN_INTERVAL_S if tail is not None and tail.live else REPLAN_INTERVAL_S
    waiting = time.perf_counter()
    woken = await ctx.watch.wait(keys, min(interval, remaining), since=seen)
    long_poll_waited(time.perf_counter() - waiting)
    return woken


def _plan_request(wanted: list[Wanted], max_bytes: int, isolation_level: int) -> dict[str, Any]:
    """The `fetch-plan` request for these partitions (the tail index plans from the same)."""
    return {
        "partitions": [
            {
                "topic_id": w.info.topic_id_str,
                "partition": w.partition,
                "offset": w.offset,
                "max_bytes": w.max_bytes,
            }
            for w in wanted
        ],
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
    }


def _whole(wanted: list[Wanted], read_committed: bool) -> bool:
    """Whether every partition's answer runs to its end (the last stable offset for
    read_committed, else the high watermark): no byte budget held any of it back."""
    return all(
        w.sent_end
        >= (w.answer["last_stable_offset"] if read_committed else w.answer["high_watermark"])
        for w in wanted
    )


def _count_sent(
    ctx: AgentContext,
    total: int,
    sent: tuple[tuple[str, int, int], ...],
    client_zone: str | None,
    consumed: bool,
) -> None:
    """Count an answer's record bytes by zone and, for consumers, by topic."""
    if total:
        count_client_bytes(total, client_zone, ctx.config.zone, ctx.known_zones())
    if consumed:
        for topic_id, size, records in sent:
            CONSUMED.add(topic_id, size, records)


# Single flight: a `fetch-plan` call in flight, by its request, that an identical
# request (consumers of other groups at the same offsets, as after a restart) awaits
# instead of asking again. Plans are only read, never changed, so they are shared.
_IN_FLIGHT: dict[tuple[int, str], asyncio.Future[dict[str, Any]]] = {}


async def _shared_plan(ctx: AgentContext, plan_request: dict[str, Any]) -> dict[str, Any]:
    key = (id(ctx.client), json.dumps(plan_request, sort_keys=True, separators=(",", ":")))
    pending = _IN_FLIGHT.get(key)
    if pending is not None:
        return await asyncio.shield(pending)
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    _IN_FLIGHT[key] = future
    try:
        plan = await ctx.client.call("fetch-plan", plan_request)
    except asyncio.CancelledError:  # this Fetch went away; the others did not
        future.set_exception(ControlPlaneUnavailable("fetch-plan cancelled", outcome_unknown=False))
        future.exception()  # retrieved: nobody else may be waiting
        raise
    except Exception as exc:
        future.set_exception(exc)
        future.exception()
        raise
    else:
        future.set_result(plan)
        return plan
    finally:
        del _IN_FLIGHT[key]


async def _assemble(
    ctx: AgentContext,
    wanted: list[Wanted],
    planned: list[dict[str, Any]],
    max_bytes: int,
    read_committed: bool = False,
    *,
    shared: bool = True,
) -> tuple[int, bool]:
    """Fill each answer from its plan; returns (bytes of records, any partition error).
    `shared`: keep the walks of runs read for the next Fetches (a plan of the tail, which
    other consumers read too; not a catch-up's, which is read once).

    The plan names partition runs; each is read whole and walked batch by batch: batches
    before the fetch offset are skipped, every batch gets its assigned baseOffset, and
    the size rules are Kafka's (KIP-74) at batch granularity: the first batch of the
    response is returned whatever its size; after that a batch is included only if it
    fits both the partition's and the request's remaining budget.
    """
    if len(planned) != len(wanted):
        raise ValueError(f"fetch-plan answered {len(planned)} partitions for {len(wanted)}")
    chosen: list[tuple[Wanted, list[dict[str, Any]]]] = []
    errors = False
    for item, plan in zip(wanted, planned, strict=True):
        answer = item.answer
        answer["error_code"] = plan["error_code"]
        answer["high_watermark"] = plan["high_watermark"]
        answer["last_stable_offset"] = plan.get("last_stable_offset", plan["high_watermark"])
        answer["log_start_offset"] = plan["log_start_offset"]
        answer["aborted_transactions"] = plan.get("aborted_transactions")
        answer["records"] = b""
        item.sent_bytes = item.sent_records = 0
        item.sent_end = item.offset
        item.read_short = False
        if plan["error_code"]:
            errors = True
            continue
        ctx.offsets.learn(
            item.info.topic_id_str,
            item.partition,
            high_watermark=plan["high_watermark"],
            log_start=plan["log_start_offset"],
            last_stable=plan.get("last_stable_offset", -1),
        )
        if plan["batches"]:
            chosen.append((item, plan["batches"]))
    if not chosen:
        return 0, errors

    cache = ctx.cache
    walked_bytes = min(_WALKED_MAX_BYTES, ctx.config.cache_bytes // 8) if shared else 0
    for _, runs in chosen:
        for run in runs:
            if "marker" not in run:
                cache.prefetch(run["file_key"], run["pos"], run["len"])
    total = 0
    for item, runs in chosen:
        pieces: list[bytes | memoryview] = []
        used = 0
        # read_committed: nothing at or past the last stable offset (a run may cross it).
        end = item.answer["last_stable_offset"] if read_committed else None
        try:
            for run in runs:
                if "marker" in run:
                    if run["base_offset"] < item.offset:
                        continue
                    marker = control_batch(run["base_offset"], run["marker"])
                    if (total or pieces) and (
                        used + len(marker) > item.max_bytes or total + len(marker) > max_bytes
                    ):
                        raise _Full
                    pieces.append(marker)
                    used += len(marker)
                    total += len(marker)
                    item.sent_end = run["base_offset"] + 1
                    continue
                walked = await _walked(cache, run, walked_bytes)
                batches = walked.lasts
                # From the first batch the fetch offset needs (the consumer skips what
                # comes before it in a batch), below the last stable offset
                # (read_committed), while the budgets last (KIP-74: the response's first
                # batch goes whatever its size).
                i = bisect.bisect_left(batches, item.offset)
                n = len(batches) if end is None else bisect.bisect_left(walked.bases, end, i)
                if i < n:
                    cum = walked.cum_bytes
                    start = i + 1 if total == 0 and not pieces else i
                    allowed = min(item.max_bytes - used, max_bytes - total) - (cum[start] - cum[i])
                    j = max(start, bisect.bisect_right(cum, cum[start] + allowed, start, n + 1) - 1)
                    size = cum[j] - cum[i]
                    pieces.extend(walked.pieces[2 * i : 2 * j])
                    used += size
                    total += size
                    item.sent_bytes += size
                    item.sent_records += walked.cum_records[j] - walked.cum_records[i]
                    if j > i:
                        item.sent_end = batches[j - 1] + 1
                    if j < n:
                        raise _Full
                if n < len(batches):
                    raise _Full
                if walked.error is not None:
                    raise walked.error
        except _Full:
            pass
        except Exception as exc:  # missing object, I/O error, short file, a bad run
            item.read_short = True
            _READ_ERRORS.inc()
            log.warning("reading %s of partition %d failed: %s", item.info, item.partition, exc)
            if not pieces:
                item.answer["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                errors = True
        if pieces:
            item.answer["records"] = pieces
    return total, errors


class _Walked:
    """A run's batches walked once and shared by every Fetch that reads it (consumers of
    every group at the tail read the same newest runs): per batch its assigned offsets,
    the response bytes — the 16-byte rewritten prefix and the rest of the batch, a view
    of one copy of the run's bytes — and running totals of bytes and records, so that a
    Fetch takes the batches it may send with two bisections and one list slice."""

    __slots__ = ("bases", "lasts", "pieces", "cum_bytes", "cum_records", "error", "size")

    def __init__(self) -> None:
        self.bases: list[int] = []
        self.lasts: list[int] = []
        self.pieces: list[bytes | memoryview] = []  # two a batch: prefix, rest
        self.cum_bytes = [0]  # bytes of the batches before each (and of all, last)
        self.cum_records = [0]
        self.error: Exception | None = None  # a walk that failed after these batches
        self.size = 0


# Walked runs by (file key, position, length, base offset, last offset, rewrite): files
# never change (a compaction writes new ones), so neither does a run's walk. Only runs of
# plans from the tail index are kept; bounded by the bytes of the runs held — an eighth
# of the read cache's, at most 32 MiB (none with no read cache) —; each holds one copy of
# its run (never a view pinning a whole cache chunk). A walk not kept (a catch-up's) is of
# views into the cached chunks, no copy.
_WALKED: OrderedDict[tuple[Any, ...], _Walked] = OrderedDict()
_WALKED_MAX_BYTES = 32 * 1024 * 1024
_walked_bytes = 0


async def _walked(cache: Any, run: dict[str, Any], max_bytes: int) -> _Walked:
    """The run's batches walked (`core.segment.run_batches`), from `_WALKED` or read and
    kept there within `max_bytes`."""
    global _walked_bytes
    rewrite = run.get("rewrite", True)
    key = (run["file_key"], run["pos"], run["len"], run["base_offset"], run["last_offset"], rewrite)
    walked = _WALKED.get(key)
    if walked is not None:
        _WALKED.move_to_end(key)
        return walked
    views = await cache.read(run["file_key"], run["pos"], run["len"])
    keep = 0 < run["len"] <= max_bytes
    data = views[0] if len(views) == 1 and not keep else memoryview(b"".join(views))
    walked = _Walked()
    try:
        for batch in run_batches(
            data, base_offset=run["base_offset"], last_offset=run["last_offset"], rewrite=rewrite
        ):
            size = batch.length
            walked.bases.append(batch.base_offset)
            walked.lasts.append(batch.last_offset)
            walked.pieces.append(_PREFIX.pack(batch.base_offset, size - 12, _LEADER_EPOCH))
            walked.pieces.append(data[batch.position + _PREFIX.size : batch.position + size])
            walked.cum_bytes.append(walked.cum_bytes[-1] + size)
            walked.cum_records.append(
                walked.cum_records[-1] + batch.last_offset - batch.base_offset + 1
            )
    except Exception as exc:  # a short or corrupt run: its batches before the fault serve
        walked.error = exc
        return walked  # not kept: the next Fetch reads it again
    walked.size = len(data)
    if keep and key not in _WALKED:
        _WALKED[key] = walked
        _walked_bytes += walked.size
        while _walked_bytes > max_bytes:
            _walked_bytes -= _WALKED.popitem(last=False)[1].size
    return walked


def control_batch(offset: int, marker: dict[str, Any]) -> bytes:
    """The control batch of a commit or abort marker at `offset` (KIP-98): one record,
    key (version 0, type 1 commit / 0 abort), value (version 0, coordinator epoch)."""
    record = RecordInput(
        key=_MARKER_KEY.pack(0, 1 if marker["committed"] else 0),
        value=_MARKER_VALUE.pack(0, 0),
        timestamp=marker["timestamp"],
    )
    return encode_batch(
        [record],
        base_offset=offset,
        producer_id=marker["producer_id"],
        producer_epoch=marker["producer_epoch"],
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=_LEADER_EPOCH,
    )


class _Full(Exception):
    """A partition's or the response's byte budget is used up."""
