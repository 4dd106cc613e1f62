"""All three metadata nodes lost: Floe comes back from the bucket alone.

Floe (web server and an agent, real processes) runs on the replicated metadata PostgreSQL
while an idempotent producer (confluent-kafka, acks=all) sends at a steady rate; then every
node is SIGKILLed and its data folder deleted. A new PostgreSQL restored from the bucket
(the base backup plus the archived WAL) to "latest", with Floe's migrations applied and
Floe started on it, serves every record acknowledged up to the last archived WAL at the
offset it was acknowledged with. The records acknowledged after that are the RPO, bounded
by `archive_timeout`; the test measures and prints it. Restoring to a time between serves
exactly what was acknowledged by then. The longest case of tests/ha (~3 minutes)."""

from __future__ import annotations

import datetime as dt
import shutil
import time

import pytest

from tests.faults.probe import FAULT_ROW
from tests.fixtures_s3 import create_bucket
from tests.ha.cluster import ARCHIVE_TIMEOUT_S
from tests.ha.floe import FloeOn, produce_steadily, read_everything

pytestmark = [pytest.mark.ha, pytest.mark.kafka]

TOPIC, PARTITIONS = "ledger", 2
RATE = 50  # records a second


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)


def _serve_from(database_url: str, bucket_url: str, folder, key: str) -> dict:
    """Floe on a restored database (its migrations applied: none are missing), read back."""
    floe = FloeOn(database_url, bucket_url, folder)
    try:
        floe.prepare(make_cluster=False)
        bootstrap = floe.start(key)
        return read_everything(bootstrap, TOPIC, PARTITIONS)
    finally:
        floe.stop()


def test_all_nodes_lost_floe_restored_from_the_bucket_serves_what_was_archived(
    ha, tmp_path, request
):
    bucket_url = f"s3://{create_bucket(ha.s3_endpoint)}?endpoint={ha.s3_endpoint}&region=us-east-1"
    floe = FloeOn(ha.node_dsn(ha.primary()), bucket_url, tmp_path / "before")
    key = floe.prepare(make_cluster=True)
    try:
        bootstrap = floe.start(key)
        _create_topic(bootstrap)
        ha.backup()  # the base backup a restore starts from; the WAL after it is archived
        acked = produce_steadily(bootstrap, TOPIC, seconds=8, rate=RATE, prefix="a")
        middle = dt.datetime.now(dt.UTC)
        acked.update(produce_steadily(bootstrap, TOPIC, seconds=8, rate=RATE, prefix="b"))
        lost_at = time.time()
        ha.kill_all()  # every machine at once: processes killed, disks gone
        for node in ha.nodes:
            shutil.rmtree(node.data)
    finally:
        floe.stop()
    assert len(acked) >= RATE * 12, f"only {len(acked)} acknowledged"

    began = time.monotonic()
    restored = ha.restore_to("latest")
    restored_in = time.monotonic() - began
    served = _serve_from(restored.dsn, bucket_url, tmp_path / "latest", key)
    serving_in = time.monotonic() - began

    moved = {v: (a.partition, a.offset) for v, a in acked.items()
             if v in served and served[v] != (a.partition, a.offset)}  # fmt: skip
    assert not moved, f"served at other offsets: {list(moved.items())[:5]}"
    missing = sorted(v for v in acked if v not in served)
    # What is missing is the tail acknowledged after the last archived WAL: nothing older.
    rpo_s = lost_at - min((acked[v].at for v in missing), default=lost_at)
    kept_after = [
        v for v in acked if v in served and any(acked[m].at < acked[v].at for m in missing)
    ]
    request.node.user_properties.append((FAULT_ROW, (
        f"{'all-nodes-lost-restore-latest':<34} acked {len(acked)}, served {len(acked) - len(missing)},"
        f" missing {len(missing)} (RPO {rpo_s:.1f} s, archive_timeout {ARCHIVE_TIMEOUT_S} s)"
    )))  # fmt: skip
    print(f"\nrestore to latest: {len(missing)} of {len(acked)} acknowledged records missing,"
          f" RPO {rpo_s:.1f} s (archive_timeout {ARCHIVE_TIMEOUT_S} s); restored in"
          f" {restored_in:.1f} s, Floe serving it all {serving_in:.1f} s after the restore began")  # fmt: skip
    assert rpo_s <= ARCHIVE_TIMEOUT_S + 3, (rpo_s, missing[:5])
    assert len(kept_after) <= len(acked) // 100, "records kept past a missing one"
    restored.stop()

    # Restoring to a time in the middle serves what was acknowledged by then, and not what
    # was acknowledged later (a record acknowledged within a moment of it may go either way).
    at_middle = ha.restore_to(middle)
    served_middle = _serve_from(at_middle.dsn, bucket_url, tmp_path / "middle", key)
    cut = middle.timestamp()
    before = {v for v, a in acked.items() if a.at < cut - 0.5}
    after = {v for v, a in acked.items() if a.at > cut + 0.5}
    assert before <= set(served_middle), sorted(before - set(served_middle))[:5]
    assert not after & set(served_middle), sorted(after & set(served_middle))[:5]
    assert all(served_middle[v] == (acked[v].partition, acked[v].offset)
               for v in served_middle if v in acked)  # fmt: skip
