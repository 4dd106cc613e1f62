"""``floe diagnose-record`` and ``floe file-scrubber`` against a live agent (a real
process, its bucket a folder) and the live control plane's REST API."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests import factories
from tests.agents.groups.test_clients import create_topic
from tests.floecli.run import floe

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(60)]


def produce_five(bootstrap: str, topic: str) -> list[tuple[bytes, bytes, list, int]]:
    """Five records in one batch, with keys, headers and timestamps of their own."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    sent = [
        (
            b"k%d" % i,
            b"value %d" % i,
            [("trace", b"t%d" % i), ("empty", None)],
            1_700_000_000_000 + i,
        )
        for i in range(5)
    ]
    try:
        for key, value, headers, ts in sent:
            producer.produce(
                topic, key=key, value=value, headers=headers, timestamp=ts, partition=0
            )
        assert producer.flush(10) == 0
    finally:
        producer.flush(1)
    return sent


def rest_args(cluster, live_server, key: str) -> list[str]:
    return ["--api-url", live_server.url, "--cluster", cluster.public_id, "--api-key", key]


def test_diagnose_record_checks_a_record_end_to_end_and_catches_a_corrupt_byte(
    agent, cluster, bucket_url, live_server
):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "audit", 1)
    sent = produce_five(a.bootstrap, "audit")
    key = factories.make_api_key(cluster.cluster.organization, role="member")
    rest = rest_args(cluster, live_server, key)

    done = floe("diagnose-record", "audit", "0", "3", *rest, "-b", a.bootstrap, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    where = doc["location"]
    assert (where["topic"], where["partition"], where["offset"]) == ("audit", 0, 3)
    assert where["base_offset"] <= 3 <= where["last_offset"]
    assert where["file_state"] == "live" and where["rewrite"] is True
    assert doc["bucket"] == bucket_url  # the cluster's, from the control plane
    path = Path(bucket_url.removeprefix("file://")) / where["file_key"]
    assert path.stat().st_size == where["file_size"]
    assert doc["problems"] == [] and all(b["crc_ok"] for b in doc["batches"])
    k, v, headers, ts = sent[3]
    expected = {
        "offset": 3,
        "timestamp": ts,
        "key": k.decode(),
        "value": v.decode(),
        "headers": [["trace", "t3"], ["empty", None]],
    }
    assert doc["record"] == expected
    assert doc["consumer_record"] == expected

    text = floe("diagnose-record", "audit", "0", "0", *rest, "--bucket", bucket_url)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"audit[0]@0: run {where['base_offset']}..")
    assert "CRC ok" in text.stdout and "record: timestamp 1700000000000 key k0" in text.stdout

    beyond = floe("diagnose-record", "audit", "0", "5", *rest)
    assert beyond.returncode == 1
    assert beyond.stderr == (
        "floe diagnose-record: GET /api/v1/clusters/"
        f"{cluster.public_id}/topics/audit/partitions/0/locate?offset=5: HTTP 404: "
        "offset 5 is out of range: audit[0] holds offsets 0..4\n"
    )
    assert floe("diagnose-record", "nope", "0", "0", *rest).stderr.endswith(
        "HTTP 404: no partition 0 of a topic 'nope'\n"
    )
    refused = floe("diagnose-record", "audit", "0", "3", *rest[:-1], "not-a-key")
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr

    [holder] = [b for b in doc["batches"] if b["holds_offset"]]
    data = bytearray(path.read_bytes())
    data[holder["position"] + holder["length"] - 2] ^= 0xFF  # a record byte: CRC-covered
    path.write_bytes(bytes(data))
    broken = floe("diagnose-record", "audit", "0", "3", *rest, "--json")
    assert broken.returncode == 1
    assert broken.stderr == (
        f"floe diagnose-record: 1 problems: batch at byte {holder['position']} of "
        f"{where['file_key']} (offsets {holder['base_offset']}..{holder['last_offset']}): "
        "CRC-32C mismatch\n"
    )
    assert json.loads(broken.stdout)["record"] is None


def test_file_scrubber_reports_and_deletes_only_old_orphans(
    agent, cluster, bucket_url, live_server
):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "audit", 1)
    produce_five(a.bootstrap, "audit")
    key = factories.make_api_key(cluster.cluster.organization, role="member")
    rest = rest_args(cluster, live_server, key)
    bucket = Path(bucket_url.removeprefix("file://"))
    folder = bucket / cluster.public_id
    live = sorted(p for p in folder.rglob("*.seg") if p.is_file())
    assert live, "the agent wrote no segment file"

    first = json.loads(floe("file-scrubber", *rest, "--json").stdout)
    grace = first["grace_s"]
    assert first["orphans"] == [] and first["known_files"] >= len(live)
    old_time = time.time() - grace - 3600

    def plant(relative: str, *, old: bool) -> Path:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"not committed")
        if old:
            os.utime(path, (old_time, old_time))
        return path

    orphan = plant("segments/2020/01/01/planted-old.seg", old=True)
    young = plant("segments/2020/01/01/planted-new.seg", old=False)
    # An agent's journal entry (committed later, maybe by another agent): spared, however
    # old; an object that is no segment file: not the scrubber's to judge.
    journal = plant("journal/agent-x/1/000000000000.seg", old=True)
    not_segment = plant("README.txt", old=True)
    elsewhere = bucket / "another-cluster" / "old.seg"  # outside the cluster's folder
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"x")
    os.utime(elsewhere, (old_time, old_time))
    orphan_key = f"{cluster.public_id}/segments/2020/01/01/planted-old.seg"

    report = floe("file-scrubber", *rest, "--json")
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    assert [o["key"] for o in doc["orphans"]] == [orphan_key]
    assert doc["orphans"][0]["size"] == len(b"not committed")
    assert doc["unknown_within_grace"] >= 1 and doc["deleted"] == []
    table = floe("file-scrubber", *rest).stdout.splitlines()
    assert table[0].split() == ["KEY", "BYTES", "AGE-S"]
    assert table[1].split()[:2] == [orphan_key, "13"]
    assert table[-1].startswith("1 orphans (13 bytes) older than ")
    assert table[-1].endswith("; nothing deleted")

    declined = floe("file-scrubber", *rest, "--delete", stdin="n\n")
    assert declined.returncode == 1 and orphan.exists()
    assert declined.stderr.endswith("floe file-scrubber: not confirmed: nothing deleted\n")
    deleted = floe("file-scrubber", *rest, "--delete", "--json", stdin="y\n")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stderr.startswith("delete 1 orphans (13 bytes) older than ")
    assert json.loads(deleted.stdout)["deleted"] == [orphan_key]
    assert not orphan.exists()
    assert young.exists() and journal.exists() and not_segment.exists() and elsewhere.exists()
    assert all(p.exists() for p in live)
    # The live file still serves its records, byte for byte.
    check = floe("diagnose-record", "audit", "0", "4", *rest, "-b", a.bootstrap)
    assert check.returncode == 0, check.stderr
