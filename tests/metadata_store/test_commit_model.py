"""The commit function against a model: random sequences of commits (plain and idempotent
producers), retried files, resent idempotent batches, sequence gaps, DeleteRecords and
retention. After every step the store agrees with the model, each partition's index is
dense (every run starts where the previous one ended, the last ends at the high
watermark) and no high watermark or log start offset ever went back."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from core.kafka.errors import ErrorCode
from metadata_store.models import Batch, Partition
from metadata_store.retention import batches_below_log_start_delete, log_start_offsets_advance
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db

PARTITIONS = 2
PRODUCERS = 2


@dataclass
class _Producer:
    producer_id: int
    next_seq: dict[int, int] = field(default_factory=dict)  # partition → next sequence
    # partition → the last five accepted (base sequence, records, base offset)
    recent: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)


def _machine(agent_api, alice):
    cluster = alice["cluster"]

    class CommitModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.topic_id = agent_api.create_topic(f"model-{uuid.uuid4().hex[:12]}", PARTITIONS)
            self.hw = [0] * PARTITIONS
            self.log_start = [0] * PARTITIONS
            self.seen_hw = [0] * PARTITIONS
            self.seen_start = [0] * PARTITIONS
            self.files: list[tuple[dict, dict]] = []  # (body, first answer)
            self.producers = []
            for _ in range(PRODUCERS):
                answer = agent_api("init-producer-id", {"transactional_id": None})
                self.producers.append(_Producer(answer["producer_id"]))

        def _commit(self, batches: list[dict]) -> dict:
            body = {
                "file_key": f"{cluster.public_id}/segments/model-{uuid.uuid4().hex}.seg",
                "size": 100 * len(batches),
                "batches": [dict(b, pos=100 * i) for i, b in enumerate(batches)],
            }
            answer = agent_api("commit", body)
            self.files.append((body, answer))
            return answer

        @rule(
            entries=st.lists(
                st.tuples(
                    st.integers(0, PARTITIONS - 1),
                    st.integers(1, 5),
                    st.one_of(st.none(), st.integers(0, PRODUCERS - 1)),
                ),
                min_size=1,
                max_size=5,
            )
        )
        def commit(self, entries):
            batches, expected = [], []
            for partition, records, who in entries:
                extra = {}
                if who is not None:
                    producer = self.producers[who]
                    seq = producer.next_seq.get(partition, 0)
                    producer.next_seq[partition] = seq + records
                    extra = {
                        "producer_id": producer.producer_id,
                        "producer_epoch": 0,
                        "base_sequence": seq,
                    }
                    recent = producer.recent.setdefault(partition, [])
                    recent.append((seq, records, self.hw[partition]))
                    del recent[:-5]
                batches.append(batch(self.topic_id, partition, records, **extra))
                expected.append(self.hw[partition])
                self.hw[partition] += records
            answer = self._commit(batches)
            assert [b["error_code"] for b in answer["batches"]] == [0] * len(batches)
            assert [b["base_offset"] for b in answer["batches"]] == expected

        @precondition(lambda self: self.files)
        @rule(data=st.data())
        def retry_a_file(self, data):
            body, first = data.draw(st.sampled_from(self.files))
            assert agent_api("commit", body) == first

        @precondition(lambda self: any(p.recent for p in self.producers))
        @rule(data=st.data())
        def resend_an_idempotent_batch(self, data):
            producer = data.draw(st.sampled_from([p for p in self.producers if p.recent]))
            partition = data.draw(st.sampled_from(sorted(producer.recent)))
            seq, records, base = data.draw(st.sampled_from(producer.recent[partition]))
            extra = {"producer_id": producer.producer_id, "producer_epoch": 0}
            answer = self._commit(
                [batch(self.topic_id, partition, records, base_sequence=seq, **extra)]
            )
            assert answer["batches"][0]["error_code"] == 0
            assert answer["batches"][0]["base_offset"] == base

        @precondition(lambda self: any(p.next_seq for p in self.producers))
        @rule(data=st.data(), gap=st.integers(1, 1000))
        def skip_sequences(self, data, gap):
            producer = data.draw(st.sampled_from([p for p in self.producers if p.next_seq]))
            partition = data.draw(st.sampled_from(sorted(producer.next_seq)))
            extra = {"producer_id": producer.producer_id, "producer_epoch": 0}
            seq = producer.next_seq[partition] + gap
            answer = self._commit([batch(self.topic_id, partition, 1, base_sequence=seq, **extra)])
            assert answer["batches"][0]["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

        @rule(partition=st.integers(0, PARTITIONS - 1), data=st.data())
        def delete_records(self, partition, data):
            offset = data.draw(st.integers(-1, self.hw[partition]))
            answer = agent_api(
                "delete-records",
                {
                    "partitions": [
                        {"topic_id": self.topic_id, "partition": partition, "offset": offset}
                    ]
                },
            )
            target = self.hw[partition] if offset == -1 else offset
            self.log_start[partition] = max(self.log_start[partition], target)
            assert answer["partitions"][0]["low_watermark"] == self.log_start[partition]

        @rule(partition=st.integers(0, PARTITIONS - 1), offset=st.integers(0, 200))
        def retention(self, partition, offset):
            pid = Partition.objects.get(topic_id=self.topic_id, index=partition).pk
            log_start_offsets_advance(moves={pid: offset})
            batches_below_log_start_delete(cluster_id=cluster.id)
            start = max(self.log_start[partition], min(offset, self.hw[partition]))
            self.log_start[partition] = start

        @invariant()
        def the_store_agrees_and_offsets_are_dense(self):
            rows = Partition.objects.filter(topic_id=self.topic_id).order_by("index")
            for part in rows:
                i = part.index
                assert (part.log_start_offset, part.high_watermark) == (
                    self.log_start[i],
                    self.hw[i],
                )
                assert part.high_watermark >= self.seen_hw[i]
                assert part.log_start_offset >= self.seen_start[i]
                self.seen_hw[i], self.seen_start[i] = part.high_watermark, part.log_start_offset
                runs = list(
                    Batch.objects.filter(partition=part)
                    .order_by("last_offset")
                    .values_list("base_offset", "last_offset", "record_count")
                )
                if not runs:
                    assert part.log_start_offset == part.high_watermark
                    continue
                assert runs[0][0] <= part.log_start_offset
                assert runs[-1][1] == part.high_watermark - 1
                for (_, last, _), (base, _, _) in zip(runs, runs[1:]):
                    assert base == last + 1
                assert all(last - base + 1 == count for base, last, count in runs)

    return CommitModel


def test_commits_against_a_model_keep_offsets_dense_and_watermarks_forward(agent_api, alice):
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        _machine(agent_api, alice),
        settings=settings(
            max_examples=40,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )
