"""What a share group (KIP-932) delivers, and what it costs the metadata store.

One agent, the real web server. `--records` 1 KiB records are produced to a topic of ONE
partition and read by `--members` confluent-kafka ShareConsumers of one share group
(implicit acknowledgement: a poll accepts the previous poll's records), each in its own
thread; then the same number of records, produced to a topic of as many partitions as
members, are read by a classic consumer group of `--members` Consumers, in the same
sitting. For each: records/s (first poll to the last record), and the agent-API calls
the web server answered (its /metrics) per 1,000 records, by call.

    .venv/bin/python bench/share_groups.py [--records 60000] [--members 8]

One JSON object at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import bench_env, control_plane, django_setup
from groups import counters

VALUE = b"x" * 1024


def _produce(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    from produce import producer

    p = producer(bootstrap)
    for i in range(records):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(120):
        raise RuntimeError("records not delivered")


def _consume(make, records: int, members: int, timeout_s: float) -> tuple[float, int, int]:
    """Run `members` consumers (`make(i)` builds one) until `records` distinct offsets
    arrived: (seconds from the first record to the last, distinct, delivered)."""
    lock = threading.Lock()
    seen: set[tuple[int, int]] = set()
    delivered = [0]
    first: list[float] = []
    stop = threading.Event()

    def run(i: int) -> None:
        consumer = make(i)
        try:
            while not stop.is_set():
                batch = consumer.poll(0.5)
                if not isinstance(batch, list):  # a classic consumer's consume()
                    batch = list(batch)
                got = [(m.partition(), m.offset()) for m in batch if m.error() is None]
                if got and not stop.is_set():
                    # (Once the last record arrived the members close: a closing
                    # member's last records may come again to one still polling.)
                    with lock:
                        if not first:
                            first.append(time.perf_counter())
                        seen.update(got)
                        delivered[0] += len(got)
                        if len(seen) >= records:
                            stop.set()
        finally:
            consumer.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    while not stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)
    ended = time.perf_counter()
    stop.set()
    for t in threads:
        t.join(30)
    return (ended - first[0]) if first else float("nan"), len(seen), delivered[0]


class _Batched:
    """A classic Consumer polled in batches, like a ShareConsumer's poll."""

    def __init__(self, consumer) -> None:
        self.consumer = consumer

    def poll(self, timeout: float):
        return self.consumer.consume(500, timeout)

    def close(self) -> None:
        self.consumer.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)

    from confluent_kafka import Consumer, ShareConsumer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )
    from produce import create_topic, start_agent

    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-"))
    env = bench_env(data_dir, database="floe_bench_share")
    django_setup(env)
    from tests.factories import make_cluster

    _, key = make_cluster("bench")
    bucket = data_dir / "bucket"
    bucket.mkdir()
    results: dict = {"records": args.records, "record_bytes": len(VALUE), "members": args.members}
    with control_plane(env) as url:
        agent, bootstrap = start_agent(url, key, bucket, 20)
        try:
            create_topic(bootstrap, "queue", 1)
            create_topic(bootstrap, "spread", args.members)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            resource = ConfigResource(
                ResourceType.GROUP,
                "bench-share",
                incremental_configs=[
                    ConfigEntry(
                        "share.auto.offset.reset",
                        "earliest",
                        incremental_operation=AlterConfigOpType.SET,
                    )
                ],
            )
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(30)
            print(f"producing 2 x {args.records} records", file=sys.stderr, flush=True)
            _produce(bootstrap, "queue", args.records, 1)
            _produce(bootstrap, "spread", args.records, args.members)

            def share_member(i: int):
                c = ShareConsumer(
                    {"bootstrap.servers": bootstrap, "group.id": "bench-share",
                     "client.id": f"share-{i}"}
                )  # fmt: skip
                c.subscribe(["queue"])
                return c

            def classic_member(i: int):
                c = Consumer(
                    {"bootstrap.servers": bootstrap, "group.id": "bench-classic",
                     "client.id": f"classic-{i}", "auto.offset.reset": "earliest",
                     "enable.auto.commit": True}
                )  # fmt: skip
                c.subscribe(["spread"])
                return _Batched(c)

            for name, make in (("share_one_partition", share_member),
                               (f"classic_{args.members}_partitions", classic_member)):  # fmt: skip
                print(f"{name}: {args.members} members", file=sys.stderr, flush=True)
                before = counters(url, "floe_agent_api_calls_total", "call")
                seconds, distinct, delivered = _consume(
                    make, args.records, args.members, args.timeout
                )
                after = counters(url, "floe_agent_api_calls_total", "call")
                calls = {k: v - before.get(k, 0.0) for k, v in after.items()}
                calls = {k: v for k, v in calls.items() if v > 0}
                results[name] = {
                    "seconds": round(seconds, 2),
                    "records_per_s": round(distinct / seconds) if seconds else None,
                    "distinct_records": distinct,
                    "deliveries": delivered,
                    "agent_api_calls_per_1000_records": round(
                        sum(calls.values()) * 1000 / max(distinct, 1), 2
                    ),
                    "agent_api_calls_by_call": {k: int(v) for k, v in sorted(calls.items())},
                }
        finally:
            agent.terminate()
            agent.wait(20)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
