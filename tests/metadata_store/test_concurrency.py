"""16 agents commit at once to overlapping partitions over real HTTP."""

from __future__ import annotations

import json
import random
import threading
import urllib.request

import pytest

from metadata_store.models import Batch, Partition
from metadata_store.topics import topic_create

THREADS, COMMITS_EACH, PARTITIONS = 16, 12, 8


@pytest.mark.django_db(transaction=True)
def test_concurrent_commits_give_dense_offsets_without_loss(live_server, alice):
    topic = topic_create(cluster=alice["cluster"], name="hot", num_partitions=PARTITIONS)
    errors: list[BaseException] = []
    expected: dict[int, int] = {p: 0 for p in range(PARTITIONS)}
    lock = threading.Lock()

    def committer(n: int) -> None:
        rng = random.Random(n)
        try:
            for i in range(COMMITS_EACH):
                batches = []
                for j, p in enumerate(rng.sample(range(PARTITIONS), 5)):
                    count = rng.randint(1, 4)
                    batches.append(
                        {
                            "topic_id": str(topic.id),
                            "partition": p,
                            "pos": j * 10,
                            "len": 10,
                            "records": count,
                            "max_ts": 1,
                            "producer_id": -1,
                            "producer_epoch": -1,
                            "base_sequence": -1,
                        }
                    )
                    with lock:
                        expected[p] += count
                request = urllib.request.Request(
                    f"{live_server.url}/agent/v1/commit",
                    data=json.dumps(
                        {
                            "file_key": f"{alice['cluster'].public_id}/t{n}/{i}.seg",
                            "size": 50,
                            "batches": batches,
                        }
                    ).encode(),
                    headers={
                        "Authorization": f"Bearer {alice['agent_key']}",
                        "Content-Type": "application/json",
                    },
                )
                with urllib.request.urlopen(request, timeout=30) as response:
                    answer = json.loads(response.read())
                assert all(b["error_code"] == 0 for b in answer["batches"]), answer
        except BaseException as exc:  # reported below, with the thread's failure
            errors.append(exc)

    threads = [threading.Thread(target=committer, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]
    assert not any(t.is_alive() for t in threads)

    for part in Partition.objects.filter(topic=topic):
        offsets = list(
            Batch.objects.filter(partition=part)
            .order_by("base_offset")
            .values_list("base_offset", "last_offset")
        )
        position = 0
        for base, last in offsets:  # dense: every batch starts where the previous ended
            assert base == position
            position = last + 1
        assert position == part.high_watermark == expected[part.index]
    assert Batch.objects.count() == THREADS * COMMITS_EACH * 5
