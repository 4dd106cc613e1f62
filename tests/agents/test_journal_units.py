"""The journal path in-process: lightning acks without the control plane, Ripcord's
bound on a commit that does not answer, the agent's sequence checks, and another
agent's recovery of a journal — against a real `mem://` bucket and a fake control plane
that commits idempotently per file key (as docs/AGENT_API.md says the real one does)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

from agents.control_plane import ControlPlaneUnavailable
from agents.control_plane_link import ControlPlaneLink
from agents.journal_recovery import JournalKeeper
from agents.journal_sequences import SequenceWatch
from agents.write_path import BatchToWrite, CommitWatch, SegmentWriter
from core.journal_keys import JournalName, parse_entry_key
from core.kafka.records import RecordInput, encode_batch, iter_batches
from core.storage import open_store

TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000bb")


class JournalControlPlane:
    """`commit` (idempotent per file key; consecutive offsets per partition),
    `journal/lease` and `journal/status`; `down` makes every call fail, `frozen` makes
    commits hang until their timeout."""

    def __init__(self) -> None:
        self.link = ControlPlaneLink()
        self.down = False
        self.frozen = False
        self.files: dict[str, dict] = {}
        self.order: list[str] = []  # file keys, in the order first committed
        self.bodies: dict[str, list[dict]] = {}
        self.next_offset: dict[int, int] = {}
        self.leases: dict[str, str] = {}

    async def call(self, name: str, body: dict, *, timeout_s: float | None = None) -> dict:
        if self.down:
            self.link.record_failure()
            raise ControlPlaneUnavailable(f"{name}: refused", outcome_unknown=False)
        if self.frozen and name in ("commit", "commit-files"):
            await asyncio.sleep(timeout_s or 10)
            self.link.record_failure()
            raise ControlPlaneUnavailable(f"{name}: timed out", outcome_unknown=True)
        self.link.record_answer()
        if name == "journal/lease":
            holder = self.leases.get(body["journal"])
            if holder is None or holder == body.get("token"):
                self.leases[body["journal"]] = token = f"t-{body['agent_id']}"
                return {"token": token}
            return {"token": None}
        if name == "journal/status":
            return {"committed": [k for k in body["file_keys"] if k in self.files]}
        if name == "commit-files":  # each file as its own commit, in order
            return {"files": [await self.call("commit", file) for file in body["files"]]}
        assert name == "commit"
        self.bodies.setdefault(body["file_key"], []).append(body)
        if body["file_key"] not in self.files:
            results = []
            for entry in body["batches"]:
                base = self.next_offset.get(entry["partition"], 0)
                self.next_offset[entry["partition"]] = base + entry["records"]
                results.append({"error_code": 0, "base_offset": base, "log_start_offset": 0})
            self.files[body["file_key"]] = {"batches": results}
            self.order.append(body["file_key"])
        return self.files[body["file_key"]]

    async def call_with_retries(self, name: str, body: dict, **kwargs) -> dict:
        return await self.call(name, body)


def batch(partition: int = 0, *, lightning: bool = True, **producer) -> BatchToWrite:
    data = encode_batch([RecordInput(value=b"v")], base_offset=0, **producer)
    ((_, _, header),) = list(iter_batches(data))
    return BatchToWrite(TOPIC, partition, memoryview(data), header, lightning)


def writer_for(store, client, *, ripcord: bool = False, agent_id: str = "agt-a") -> SegmentWriter:
    return SegmentWriter(
        put=store.put,
        client=client,
        cluster_id="vci_test",
        agent_id=agent_id,
        max_bytes=1 << 20,
        max_age_ms=5,
        watch=CommitWatch(),
        journal_retry_delays_s=(0.01, 0.02),
        ripcord=lambda: ripcord,
        ripcord_ack_s=0.2,
    )


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_a_lightning_request_is_answered_while_the_control_plane_is_down_and_committed_once_after():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = JournalControlPlane()

    async def scenario():
        writer = writer_for(store, client)
        client.down = True
        answers = [await writer.append([batch()], wait=True) for _ in range(3)]
        assert [a[0]["base_offset"] for a in answers] == [-1, -1, -1]
        assert writer.journal_backlog()[0] > 0
        await asyncio.sleep(0.1)
        client.down = False
        await writer.close()
        return writer

    writer = run(scenario())
    keys = [i.key for i in store.list("vci_test/journal/")]
    assert len(keys) == 3 and client.order == sorted(keys)  # each once, in journal order
    assert all(len({str(b) for b in client.bodies[k]}) == 1 for k in keys)  # same body
    assert client.next_offset == {0: 3}
    assert writer.journal_backlog() == (0, 0.0)


def test_the_journal_marker_is_put_beside_the_first_entry_and_stored_before_its_answer():
    """The marker's PUT does not go before the entry's (two PUTs in a row in the first
    entry's ack): it waits here until the entry's PUT has started, and the answer still
    comes only once the marker is in the bucket."""
    store = open_store(f"mem://{uuid.uuid4()}")
    client = JournalControlPlane()
    entry_started = threading.Event()
    overlapped: list[bool] = []

    def put(key: str, data: bytes) -> None:
        if "/journals/" in key:  # the marker
            overlapped.append(entry_started.wait(5))
        else:
            entry_started.set()
        store.put(key, data)

    async def scenario():
        writer = writer_for(store, client)
        writer._put = put
        answered = await writer.append([batch()], wait=True)
        markers = [i.key for i in store.list("vci_test/journals/")]
        again = await writer.append([batch()], wait=True)  # the marker is fresh: no PUT
        await writer.close()
        return answered, markers, again

    answered, markers, again = run(scenario())
    assert answered[0]["base_offset"] == -1 and again[0]["base_offset"] == -1
    assert overlapped == [True]  # one marker PUT, while the entry's was under way
    assert len(markers) == 1  # stored when the first entry was answered


def test_ripcord_answers_a_standard_request_when_its_commit_does_not_answer_in_time():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = JournalControlPlane()

    async def scenario():
        writer = writer_for(store, client, ripcord=True)
        answered = await writer.append([batch(lightning=False)], wait=True)
        assert answered[0]["base_offset"] == 0  # the control plane answers: as usual
        client.frozen = True
        started = time.monotonic()
        answered = await writer.append([batch(lightning=False)], wait=True)
        took = time.monotonic() - started
        client.frozen = False
        writer.abandon()
        return answered, took

    answered, took = run(scenario())
    assert answered[0]["base_offset"] == -1
    assert took < 1.0, took  # flush age + PUT + ripcord_ack_s, not the 10 s commit timeout


def test_without_ripcord_a_standard_request_waits_for_its_commit():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = JournalControlPlane()

    async def scenario():
        writer = writer_for(store, client)
        client.down = True
        pending = writer.append([batch(lightning=False)], wait=True)
        await asyncio.sleep(0.3)
        assert not pending.done()
        writer.abandon()

    run(scenario())
    assert not list(store.list("vci_test/journal/"))  # a standard segment, not an entry


def test_the_agent_refuses_a_sequence_gap_and_passes_a_resend():
    watch = SequenceWatch()

    def header(pid: int, epoch: int, seq: int):
        return batch(producer_id=pid, producer_epoch=epoch, base_sequence=seq).header

    watch.answered(str(TOPIC), 0, header(7, 0, 0))
    assert watch.gap(str(TOPIC), 0, header(7, 0, 1)) is None
    assert watch.gap(str(TOPIC), 0, header(7, 0, 0)) is None  # a resend of what was answered
    gap = watch.gap(str(TOPIC), 0, header(7, 0, 5))
    assert gap is not None and "4 sequences missing" in gap
    assert watch.gap(str(TOPIC), 1, header(7, 0, 5)) is None  # another partition
    assert watch.gap(str(TOPIC), 0, header(7, 1, 5)) is None  # a new epoch
    assert watch.gap(str(TOPIC), 0, header(8, 0, 5)) is None


def test_another_agent_sequences_a_dead_agents_journal_after_what_was_committed():
    """Agent A journals four entries; only the first is committed before it dies. Agent
    B's keeper takes A's journal, commits the other three in order, and a second scan
    commits nothing more."""
    store = open_store(f"mem://{uuid.uuid4()}")
    client = JournalControlPlane()

    async def scenario():
        dead = writer_for(store, client, agent_id="agt-a")
        await dead.append([batch()], wait=True)
        await asyncio.sleep(0.05)  # committed
        client.down = True
        for _ in range(3):
            await dead.append([batch()], wait=True)
        dead.abandon()  # SIGKILL: nothing more from it
        client.down = False
        keeper = JournalKeeper(
            client,
            store,
            cluster_id="vci_test",
            agent_id="agt-b",
            journal=JournalName("agt-b", "boot"),
            live_agents=lambda: {"agt-b"},
            forget_after_s=0,
        )
        first = await keeper.scan()
        second = await keeper.scan()
        return first, second

    first, second = run(scenario())
    assert (first, second) == (3, 0)
    keys = sorted(i.key for i in store.list("vci_test/journal/agt-a/"))
    assert client.order == keys and client.next_offset == {0: 4}
    assert all(parse_entry_key(k) for k in keys)
    assert not list(store.list("vci_test/journals/"))  # all sequenced, writer gone
