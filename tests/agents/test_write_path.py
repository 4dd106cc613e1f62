"""The segment writer in-process: ordering of commits, failures, request atomicity.

A fake control plane stands in for the commit call so each failure can be staged
exactly; the object store is a real `mem://` one. (The end-to-end tests run the same
code against the real control plane.)
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from agents.control_plane import ControlPlaneUnavailable
from agents.write_path import BatchToWrite, CommitWatch, SegmentWriter
from core.kafka.errors import ErrorCode
from core.kafka.records import RecordInput, encode_batch, iter_batches
from core.segment import read_index
from core.storage import open_store

TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000aa")


class FakeControlPlane:
    """Answers `commit` with consecutive offsets per partition; can fail on demand."""

    def __init__(self) -> None:
        self.commits: list[dict] = []
        self.next_offset: dict[int, int] = {}
        self.failures: list[Exception] = []  # raised by the next calls, in order
        self.answered: dict[str, dict] = {}

    async def call(self, name: str, body: dict, **_: object) -> dict:
        assert name == "commit"
        self.commits.append(body)
        if self.failures:
            raise self.failures.pop(0)
        if body["file_key"] in self.answered:  # idempotent per file key, as the API says
            return self.answered[body["file_key"]]
        results = []
        for batch in body["batches"]:
            base = self.next_offset.get(batch["partition"], 0)
            self.next_offset[batch["partition"]] = base + batch["records"]
            results.append({"error_code": 0, "base_offset": base, "log_start_offset": 0})
        self.answered[body["file_key"]] = {"batches": results}
        return self.answered[body["file_key"]]


def batch(partition: int, records: int = 1, value_size: int = 10, **producer) -> BatchToWrite:
    data = encode_batch(
        [RecordInput(value=bytes(value_size)) for _ in range(records)], base_offset=0, **producer
    )
    ((_, _, header),) = list(iter_batches(data))
    return BatchToWrite(TOPIC, partition, memoryview(data), header)


def make_writer(put, client, *, max_bytes: int = 1 << 20, max_age_ms: int = 20) -> SegmentWriter:
    return SegmentWriter(
        put_retry_delays_s=(0.01, 0.01),
        commit_retry_delays_s=(0.01,),
        put=put,
        client=client,
        cluster_id="vci_test",
        agent_id="agt-test",
        max_bytes=max_bytes,
        max_age_ms=max_age_ms,
        watch=CommitWatch(),
    )


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_commits_go_out_in_segment_order_even_when_a_later_put_finishes_first():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()
    first_put = threading.Event()

    def slow_first_put(key: str, data: bytes) -> None:
        if not first_put.is_set():
            first_put.set()
            time.sleep(0.3)  # the first segment's PUT finishes well after the second's
        store.put(key, data)

    async def scenario():
        writer = make_writer(slow_first_put, client)
        a = writer.append([batch(0)], wait=True)
        writer.flush_now()
        b = writer.append([batch(0)], wait=True)
        writer.flush_now()
        return await a, await b, writer

    first, second, _ = run(scenario())
    assert [c["file_key"] for c in client.commits] == sorted(c["file_key"] for c in client.commits)
    assert first[0]["base_offset"] == 0 and second[0]["base_offset"] == 1


def test_a_failed_put_fails_exactly_that_segments_requests_with_a_retriable_error():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()
    doomed_keys: list[str] = []

    def put(key: str, data: bytes) -> None:
        if not doomed_keys:
            doomed_keys.append(key)
        if key == doomed_keys[0]:  # every attempt at the first segment fails
            raise OSError("disk on fire")
        store.put(key, data)

    async def scenario():
        writer = make_writer(put, client)
        doomed = writer.append([batch(0), batch(1)], wait=True)
        writer.flush_now()
        fine = writer.append([batch(0)], wait=True)
        writer.flush_now()
        return await doomed, await fine

    doomed, fine = run(scenario())
    assert [r["error_code"] for r in doomed] == [ErrorCode.KAFKA_STORAGE_ERROR] * 2
    assert ErrorCode.KAFKA_STORAGE_ERROR.retriable
    assert fine == [{"error_code": 0, "base_offset": 0, "log_start_offset": 0}]
    assert len(client.commits) == 1  # the failed segment was never committed


def test_a_commit_with_an_unknown_outcome_is_retried_with_the_same_file_key():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()
    client.failures = [ControlPlaneUnavailable("timed out", outcome_unknown=True)]

    async def scenario():
        writer = make_writer(store.put, client)
        pending = writer.append([batch(3, records=5)], wait=True)
        return await pending

    result = run(scenario())
    assert result == [{"error_code": 0, "base_offset": 0, "log_start_offset": 0}]
    assert len(client.commits) == 2
    assert client.commits[0]["file_key"] == client.commits[1]["file_key"]


def test_a_commit_that_keeps_failing_answers_request_timed_out_and_the_file_stays_unreferenced():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()
    client.failures = [ControlPlaneUnavailable("down", outcome_unknown=True)] * 10

    async def scenario():
        writer = make_writer(store.put, client)
        writer.commit_retry_delays_s = (0, 0, 0)
        return await writer.append([batch(0)], wait=True)

    result = run(scenario())
    # Unknown outcome: "possibly persisted", which librdkafka retries (the commit is
    # idempotent by file key, so an idempotent producer cannot get a duplicate).
    assert result[0]["error_code"] == ErrorCode.REQUEST_TIMED_OUT


def test_one_attempt_without_an_answer_makes_the_failed_commit_possibly_persisted():
    # The first attempt timed out (it may have landed), the later ones were clean 503s
    # (the database down): the requests must not be told "not persisted".
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()
    client.failures = [ControlPlaneUnavailable("timed out", outcome_unknown=True)] + [
        ControlPlaneUnavailable("503 database unavailable", outcome_unknown=False)
    ] * 3

    async def scenario():
        writer = make_writer(store.put, client)
        writer.commit_retry_delays_s = (0, 0, 0)
        return await writer.append([batch(0)], wait=True)

    result = run(scenario())
    assert result[0]["error_code"] == ErrorCode.REQUEST_TIMED_OUT


def test_a_request_is_never_split_across_two_segments():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()

    async def scenario():
        writer = make_writer(store.put, client, max_bytes=1000, max_age_ms=5000)
        first = writer.append([batch(0, value_size=300)], wait=True)
        # 3 batches of ~370 bytes do not fit beside the first: they start a new segment.
        second = writer.append([batch(p, value_size=300) for p in range(3)], wait=True)
        await writer.close()
        return await first, await second

    run(scenario())
    assert [len(c["batches"]) for c in client.commits] == [1, 3]
    for commit in client.commits:
        data = store.get(commit["file_key"])
        entries = read_index(data)
        assert [(e.position, e.length) for e in entries] == [
            (b["pos"], b["len"]) for b in commit["batches"]
        ]


def test_a_partitions_batches_without_a_producer_id_are_one_commit_entry():
    """Side by side in the file, a partition's plain batches are one entry of the commit
    (`batch_count`); each request still gets its own batches' offsets, record by record."""
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()

    async def scenario():
        writer = make_writer(store.put, client, max_age_ms=5000)
        first = writer.append([batch(0, 2), batch(1, 5)], wait=True)
        second = writer.append([batch(0, 3), batch(0, 1), batch(1, 4)], wait=True)
        await writer.close()
        return await first, await second

    first, second = run(scenario())
    (commit,) = client.commits
    entries = [(e["partition"], e["records"], e.get("batch_count", 1)) for e in commit["batches"]]
    assert entries == [(0, 6, 3), (1, 9, 2)]
    index = read_index(store.get(commit["file_key"]))
    assert [(e["pos"], e["len"]) for e in commit["batches"]] == [
        (index[0].position, sum(e.length for e in index[:3])),
        (index[3].position, sum(e.length for e in index[3:])),
    ]
    assert [r["base_offset"] for r in first] == [0, 0]  # partition 0, partition 1
    assert [r["base_offset"] for r in second] == [2, 5, 5]


def test_idempotent_and_transactional_batches_are_entries_of_their_own():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()
    idempotent = {"producer_id": 7, "producer_epoch": 0}

    async def scenario():
        writer = make_writer(store.put, client, max_age_ms=5000)
        done = writer.append(
            [
                batch(0, 2),
                batch(0, 2, **idempotent, base_sequence=0),
                batch(0, 2, **idempotent, base_sequence=2),
                batch(0, 2, producer_id=8, producer_epoch=0, is_transactional=True),
                batch(0, 2),
                batch(0, 2),
            ],
            wait=True,
        )
        await writer.close()
        return await done

    answers = run(scenario())
    (commit,) = client.commits
    assert [e.get("batch_count", 1) for e in commit["batches"]] == [1, 1, 1, 1, 2]
    assert [r["base_offset"] for r in answers] == [0, 2, 4, 6, 8, 10]


def test_segments_are_named_by_cluster_and_date():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()

    async def scenario():
        writer = make_writer(store.put, client)
        await writer.append([batch(0)], wait=True)

    run(scenario())
    key = client.commits[0]["file_key"]
    assert key.startswith("vci_test/segments/2") and key.endswith(".seg")
    assert [info.key for info in store.list("vci_test/")] == [key]


def test_acks_zero_appends_without_waiting():
    store = open_store(f"mem://{uuid.uuid4()}")
    client = FakeControlPlane()

    async def scenario():
        writer = make_writer(store.put, client)
        assert writer.append([batch(0)], wait=False) is None
        await writer.close()

    run(scenario())
    assert len(client.commits) == 1


@pytest.mark.parametrize("since_changes", [True, False])
def test_commit_watch_wakes_waiters_and_remembers_commits_they_missed(since_changes):
    async def scenario():
        watch = CommitWatch()
        key = ("t", 0)
        seen = watch.snapshot([key])
        if since_changes:
            watch.notify([key])  # lands while the fetch was planning
        started = time.monotonic()
        woke = await watch.wait([key], 0.2, since=seen)
        return woke, time.monotonic() - started

    woke, waited = run(scenario())
    assert woke is since_changes
    assert (waited < 0.05) if since_changes else (waited >= 0.19)


def test_slow_commits_make_segments_bigger_instead_of_queueing_them():
    store = open_store(f"mem://{uuid.uuid4()}")

    class SlowControlPlane(FakeControlPlane):
        async def call(self, name: str, body: dict, **kw: object) -> dict:
            await asyncio.sleep(0.1)  # each commit takes 5 batch timeouts
            return await super().call(name, body, **kw)

    client = SlowControlPlane()

    async def scenario():
        writer = make_writer(store.put, client, max_age_ms=20)
        pending = []
        for _ in range(50):  # a produce every 10 ms for 0.5 s
            pending.append(writer.append([batch(0)], wait=True))
            await asyncio.sleep(0.01)
        started = time.monotonic()
        results = await asyncio.gather(*pending)
        return results, time.monotonic() - started

    results, drain_s = run(scenario())
    assert [r[0]["base_offset"] for r in results] == list(range(50))
    # Age alone would have made ~25 segments (2.5 s of serial commits); group commit
    # folds what arrives during a commit into the next segment.
    assert len(client.commits) <= 10
    assert drain_s < 0.5


def test_the_age_timer_fires_early_by_the_time_seals_take_to_reach_their_put():
    """Segments whose PUT started late (the timer fired late, the upload thread took
    the segment late) teach the age timer to fire that much early — never by more than
    a tenth of the flush age — and ones whose PUT started early teach it back; a segment
    sealed for its size teaches nothing."""
    store = open_store(f"mem://{uuid.uuid4()}")

    async def scenario():
        writer = make_writer(store.put, FakeControlPlane(), max_age_ms=200)
        loop = asyncio.get_running_loop()

        def seal_in_ms() -> float:  # when the open segment (opened now) is sealed
            if writer._open is None:
                writer.append([batch(0)], wait=False)
            segment = writer._open
            assert segment is not None and segment.timer is not None
            return (segment.timer.when() - loop.time()) * 1000

        async def sealed(late_ms: float, reason: str = "age") -> None:
            seal_in_ms()  # one is open
            segment = writer._open
            segment.due = time.perf_counter() - late_ms / 1000  # its age was up then
            writer._seal(reason)
            await segment.committed  # its PUT started (and the lead learned) before

        assert seal_in_ms() == pytest.approx(200, abs=1)
        for _ in range(10):  # PUTs starting 3 ms (and the hop to the thread) late
            await sealed(3)
        assert 180 <= seal_in_ms() < 199
        for _ in range(50):  # far later than a tenth of the age: the lead stops there
            await sealed(500)
        assert seal_in_ms() == pytest.approx(180, abs=1)
        await sealed(-10_000, reason="size")
        assert seal_in_ms() == pytest.approx(180, abs=1)
        for _ in range(50):
            await sealed(-500)
        assert seal_in_ms() == pytest.approx(200, abs=1)
        await writer.close()

    run(scenario())
