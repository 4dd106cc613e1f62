"""A topic-to-bucket pipeline whose agent is SIGKILLed while it writes: the other
pipelines agent takes its partitions over from the committed offsets and PUTs the files
it was writing again under the same names (the partition and first input offset), so the
bucket holds every record exactly once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.agents.clients import create_topic
from tests.agents.test_pipelines import _api, _pipelines_url, _records_in, _wait

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

RECORDS = 20_000
PARTITIONS = 4
CONFIG = """
input:
  kafka: {topics: [clicks]}
processors:
  - parse_json: {}
outputs:
  default: {bucket: {prefix: "landing/", max_records: 700, max_age_seconds: 2}}
"""


def test_a_killed_agents_files_are_rewritten_not_doubled(agent, cluster, bucket_url):
    serving = agent(cluster.key)
    runner = agent(cluster.key, extra=["--roles", "pipelines"])
    create_topic(serving.bootstrap, "clicks", PARTITIONS)
    producer = Producer({"bootstrap.servers": serving.bootstrap, "linger.ms": 20})
    for i in range(RECORDS):
        value = json.dumps({"n": i, "page": f"/p/{i % 17}"}).encode()
        while True:
            try:
                producer.produce("clicks", value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0
    answer = _api(cluster).post(
        _pipelines_url(cluster),
        {"name": "clicks-landing", "config": CONFIG, "state": "running"},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    _wait(lambda: _records_in([serving, runner], "clicks-landing") >= 6_000, 60, "6,000 read")
    runner.kill()

    root = Path(bucket_url.removeprefix("file://")) / "landing" / "clicks-landing" / "clicks"

    def lines() -> list[dict]:
        return [
            json.loads(line)
            for path in sorted(root.rglob("*.jsonl"))
            for line in path.read_text().splitlines()
        ]

    _wait(lambda: len(lines()) >= RECORDS, 60, "every record in the bucket")
    time.sleep(2.5)  # a file written twice under two names would show by now
    found = lines()
    numbers = [line["value"]["n"] for line in found]
    assert len(numbers) == len(set(numbers)), f"{len(numbers) - len(set(numbers))} doubled"
    assert set(numbers) == set(range(RECORDS))
    for line in found:
        assert line["partition"] == line["value"]["n"] % PARTITIONS
        assert line["value"]["page"] == f"/p/{line['value']['n'] % 17}"
