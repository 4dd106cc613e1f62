"""Property: whatever the interleaving of produce, journaling, sequencing, control-plane
outages, agent deaths (and the producers' resends of what was not answered) and another
agent's recovery running beside a live writer, every acknowledged batch is in the log
exactly once, and each producer's batches are in the order it sent them. And with two
live agents, either cut off alone for a while, and producers whose partition leader
moves between them (issue 40: a batch reaches the store before its predecessor in the
other agent's journal), every batch is also answered without error.

The writer, the journal keeper and the bucket (`mem://`) are the real ones; the control
plane is a model of the commit call's contract (docs/AGENT_API.md "commit"): a file key
committed again gets its first answer, and an idempotent producer's batch is a duplicate
when its sequence was seen, OUT_OF_ORDER_SEQUENCE_NUMBER after a gap.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.control_plane import ControlPlaneUnavailable
from agents.control_plane_link import ControlPlaneLink
from agents.journal_recovery import JournalKeeper
from agents.write_path import BatchToWrite, CommitWatch, SegmentWriter
from core.journal_keys import JournalName
from core.kafka.errors import ErrorCode
from core.kafka.records import RecordInput, encode_batch, iter_batches
from core.storage import open_store
from tests.agents.test_journal_units import JournalControlPlane

TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000cc")


class SequencingControlPlane(JournalControlPlane):
    """Commits append each batch to the partition's log after KIP-98's checks."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[int, int]] = []  # (producer id, sequence), partition 0
        self.last_seq: dict[int, int] = {}
        self.data: dict[str, bytes] = {}

    async def call(self, name: str, body: dict, *, timeout_s: float | None = None) -> dict:
        if name != "commit" or self.down or body["file_key"] in self.files:
            return await super().call(name, body, timeout_s=timeout_s)
        self.link.record_answer()
        results = []
        for entry in body["batches"]:
            pid, seq = entry["producer_id"], entry["base_sequence"]
            last = self.last_seq.get(pid, -1)
            if seq <= last:
                results.append({"error_code": 0, "base_offset": 0, "log_start_offset": 0})
            elif seq > last + 1:
                code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                results.append({"error_code": code, "base_offset": -1, "log_start_offset": -1})
            else:
                self.last_seq[pid] = seq
                results.append(
                    {"error_code": 0, "base_offset": len(self.log), "log_start_offset": 0}
                )
                self.log.append((pid, seq))
        self.files[body["file_key"]] = {"batches": results}
        self.order.append(body["file_key"])
        return self.files[body["file_key"]]


def _batch(pid: int, seq: int, lightning: bool = True) -> BatchToWrite:
    data = encode_batch(
        [RecordInput(value=b"%d-%d" % (pid, seq))],
        base_offset=0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
    )
    ((_, _, header),) = list(iter_batches(data))
    return BatchToWrite(TOPIC, 0, memoryview(data), header, lightning)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.integers(1, 2)),
        st.tuples(st.just("wait"), st.sampled_from([0.0, 0.002, 0.01])),
        st.tuples(st.just("down"), st.booleans()),
        st.tuples(st.just("kill"), st.just(0)),
        st.tuples(st.just("recover"), st.just(0)),
    ),
    min_size=1,
    max_size=25,
)


async def _play(ops: list[tuple[str, object]]) -> tuple[SequencingControlPlane, dict]:
    store = open_store(f"mem://{uuid.uuid4()}")
    client = SequencingControlPlane()
    boots = 0

    def new_writer() -> SegmentWriter:
        return SegmentWriter(
            put=store.put,
            client=client,
            cluster_id="vci_p",
            agent_id="agt-a",
            max_bytes=1 << 20,
            max_age_ms=1,
            watch=CommitWatch(),
            journal_retry_delays_s=(0.001, 0.002),
            gap_retry_s=0.01,
        )

    keeper = JournalKeeper(
        client,
        store,
        cluster_id="vci_p",
        agent_id="agt-b",
        journal=JournalName("agt-b", "boot"),
        live_agents=lambda: {"agt-b"},
    )
    writer = new_writer()
    sent: dict[int, list[tuple[int, asyncio.Future | None]]] = {1: [], 2: []}
    acked: dict[int, set[int]] = {1: set(), 2: set()}
    resend: dict[int, list[int]] = {1: [], 2: []}

    def note_answers() -> None:
        for pid, items in sent.items():
            for seq, future in items:
                if future is not None and future.done() and not future.result()[0]["error_code"]:
                    acked[pid].add(seq)

    for op, arg in ops:
        note_answers()
        if op == "produce":
            pid = int(arg)  # type: ignore[call-overload]
            # A producer resends what was not answered, in order, before anything new.
            seqs = resend[pid] or [len(sent[pid])]
            resend[pid] = []
            for seq in seqs:
                future = writer.append([_batch(pid, seq)], wait=True)
                if seq == len(sent[pid]):
                    sent[pid].append((seq, future))
                else:
                    sent[pid][seq] = (seq, future)
        elif op == "wait":
            await asyncio.sleep(float(arg))  # type: ignore[arg-type]
        elif op == "down":
            client.down = bool(arg)
        elif op == "kill":
            writer.abandon()  # SIGKILL: its journal stays, nothing more from it
            boots += 1
            note_answers()
            for pid, items in sent.items():
                resend[pid] = [seq for seq, _ in items if seq not in acked[pid]]
            writer = new_writer()
        elif op == "recover" and not client.down:
            await keeper.scan()
    # The end: the control plane is back, producers resend, every journal is sequenced.
    client.down = False
    for pid in (1, 2):
        for seq in resend[pid]:
            sent[pid][seq] = (seq, writer.append([_batch(pid, seq)], wait=True))
    # Another agent sequences the dead writers' journals while the live one retries
    # the batches its commits refused for a gap (their predecessors are in there).
    await asyncio.sleep(0.02)
    await keeper.scan()
    await writer.close()
    note_answers()
    return client, acked


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(ops=OPS)
def test_every_acknowledged_batch_is_in_the_log_once_in_producer_order(ops):
    client, acked = asyncio.run(asyncio.wait_for(_play(ops), 30))
    assert len(client.log) == len(set(client.log))  # nothing twice
    for pid in (1, 2):
        mine = [seq for p, seq in client.log if p == pid]
        assert mine == sorted(mine), mine  # the producer's order
        missing = acked[pid] - set(mine)
        assert not missing, (pid, sorted(missing), mine)


class AgentLink:
    """One agent's connection to the shared control plane: `down` cuts this agent off
    alone (its commits fail; the other agent's go through)."""

    def __init__(self, plane: SequencingControlPlane) -> None:
        self.plane = plane
        self.link = ControlPlaneLink()
        self.down = False

    async def call(self, name: str, body: dict, *, timeout_s: float | None = None) -> dict:
        if self.down:
            self.link.record_failure()
            raise ControlPlaneUnavailable(f"{name}: refused", outcome_unknown=False)
        self.link.record_answer()
        return await self.plane.call(name, body, timeout_s=timeout_s)

    async def call_with_retries(self, name: str, body: dict, **kwargs) -> dict:
        return await self.call(name, body)


MOVES = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.integers(1, 2)),
        st.tuples(st.just("wait"), st.sampled_from([0.0, 0.002, 0.01, 0.03])),
        st.tuples(st.just("cut"), st.integers(0, 1)),  # toggle one agent's link
        st.tuples(st.just("move"), st.integers(1, 2)),  # the producer's leader changes
    ),
    min_size=1,
    max_size=30,
)


async def _play_moves(ops: list[tuple[str, int]], lightning: bool):
    store = open_store(f"mem://{uuid.uuid4()}")
    plane = SequencingControlPlane()
    links = [AgentLink(plane), AgentLink(plane)]
    writers = [
        SegmentWriter(
            put=store.put,
            client=links[n],  # type: ignore[arg-type]
            cluster_id="vci_p",
            agent_id=f"agt-{n}",
            max_bytes=1 << 20,
            max_age_ms=1,
            watch=CommitWatch(),
            journal_retry_delays_s=(0.001, 0.002),
            ripcord=lambda: True,
            ripcord_ack_s=0.005,
            gap_retry_s=0.01,
        )
        for n in range(2)
    ]
    leader = {1: 0, 2: 0}
    sent: dict[int, list[asyncio.Future]] = {1: [], 2: []}
    for op, arg in ops:
        if op == "produce":
            future = writers[leader[arg]].append(
                [_batch(arg, len(sent[arg]), lightning)], wait=True
            )
            assert future is not None
            sent[arg].append(future)
        elif op == "wait":
            await asyncio.sleep(float(arg))
        elif op == "cut":
            links[arg].down = not links[arg].down
        elif op == "move":
            leader[arg] = 1 - leader[arg]
    for link in links:
        link.down = False
    await asyncio.gather(*(w.close() for w in writers))
    answers = {pid: [f.result()[0]["error_code"] for f in futures] for pid, futures in sent.items()}
    return plane, answers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=MOVES, lightning=st.booleans())
def test_a_producer_moving_between_live_agents_is_sequenced_once_in_order_without_errors(
    ops, lightning
):
    """Two live agents (Ripcord on, or a lightning topic), either cut off alone for a
    while, and producers whose partition leader moves between them: a batch may reach
    the store before its predecessor in the other agent's journal. Every batch is
    answered without error (each producer sends in order and skips nothing), and the log
    holds each once, in each producer's order."""
    plane, answers = asyncio.run(asyncio.wait_for(_play_moves(ops, lightning), 30))
    assert len(plane.log) == len(set(plane.log))
    for pid in (1, 2):
        assert answers[pid] == [0] * len(answers[pid]), answers
        mine = [seq for p, seq in plane.log if p == pid]
        assert mine == list(range(len(answers[pid]))), mine


def test_a_recovered_batch_refused_for_a_gap_is_held_by_the_recovering_agent():
    """Agent A died with sequence 1 in its journal; sequence 0 waits in agent B's own
    journal (B is cut off). B's keeper takes A's journal over and commits it once B is
    back: 1 is refused for the gap, and B's writer holds it until its own 0 is in."""

    async def play() -> SequencingControlPlane:
        store = open_store(f"mem://{uuid.uuid4()}")
        plane = SequencingControlPlane()
        links = [AgentLink(plane), AgentLink(plane)]

        def writer_of(n: int) -> SegmentWriter:
            return SegmentWriter(
                put=store.put,
                client=links[n],  # type: ignore[arg-type]
                cluster_id="vci_p",
                agent_id=f"agt-{n}",
                max_bytes=1 << 20,
                max_age_ms=1,
                watch=CommitWatch(),
                # B's chain looks again every 0.3 s while its own link is down.
                journal_retry_delays_s=(0.3,),
                gap_retry_s=0.01,
            )

        a, b = writer_of(0), writer_of(1)
        links[0].down = links[1].down = True
        first = b.append([_batch(1, 0)], wait=True)  # lightning: answered from B's journal
        second = a.append([_batch(1, 1)], wait=True)
        assert first is not None and second is not None
        await asyncio.wait_for(asyncio.gather(first, second), 5)
        a.abandon()  # A is killed: its entry stays in the bucket, unsequenced
        # B's keeper reaches the control plane first (B's chain retries the moment its
        # own link is back: the keeper's connection is another one here).
        keeper = JournalKeeper(
            AgentLink(plane),  # type: ignore[arg-type]
            store,
            cluster_id="vci_p",
            agent_id="agt-1",
            journal=b.journal,
            live_agents=lambda: {"agt-1"},
            on_gap=b.hold_after_gap,
        )
        await keeper.recover(a.journal, marker_modified=datetime.now(UTC))
        links[1].down = False
        links[1].link.record_answer()
        await asyncio.wait_for(b.close(), 5)
        return plane

    plane = asyncio.run(asyncio.wait_for(play(), 20))
    assert plane.order[0].split("/")[2] == "agt-0"  # A's entry reached the store first
    assert plane.log == [(1, 0), (1, 1)]
