"""S3 produce against the same store's raw PUT limit, in alternating rounds.

Starts one moto S3 server (its own process, on 127.0.0.1), a control plane (uvicorn,
bench database) and one agent writing to a bucket on that server, creates a topic of
`--partitions` partitions (default 12), then runs `--rounds` rounds (default 5), each:

1. raw PUT limit: boto3 PUTs, `--put-concurrency` at a time (default: the agent's own,
   its /metrics `floe_segment_put_slots`), of objects of the sizes the agent wrote in the
   previous produce phase (the warm-up's for round 1), for `--seconds`; MiB/s;
2. produce: `--producers` confluent-kafka producers (processes; 1 KiB records, acks=all,
   every partition) flat out for `--seconds`; MiB/s from the first send to the last
   delivery report. The agent's files written meanwhile (sizes) and its /metrics deltas
   (PUT and commit time, encode time, PUTs in flight on average, flush reasons, CPU) are
   the breakdown.

and prints each round's ratio (produce / raw). The two phases alternate so that both see
the same machine load; a last raw phase closes the run, so each produce phase also has
a limit measured right after it, and `ratios_bracketed` divides by the mean of the two
(the limit itself moves from one phase to the next, by up to a third here). Prints one
JSON object (progress on stderr).

    .venv/bin/python bench/s3_produce.py [--rounds 5] [--seconds 10] [--producers 8]
                                         [--partitions 12] [--put-concurrency N]
                                         [--store-cpus 1] [--producer-nice 10]
                                         [--profile agent.prof]

`--store-cpus LIST` (e.g. `1`, or `2,3`) gives the store CPUs of its own: moto is pinned to
them and this bench with everything it starts (control plane, agent, producers, the raw
client) to the others, in both phases — the store's capacity then is the same beside the
raw client as beside Floe, as it is when the store runs on machines of its own (S3 does).
Without it every process shares every CPU, and the raw phase gives moto the whole machine.

`--producer-nice N` (default 10) runs the producer processes at niceness N. They stand
for clients, which run on machines of their own; on this one they share the agent's
CPUs, and at the same priority the agent's loop and PUT threads wait behind them (with
`--store-cpus 1` the store then idles while its PUTs' bodies wait to be sent). Niced,
they take a CPU only when the agent does not want it; `--producer-nice 0` measures them
as equals.

`--profile FILE` runs the agent under cProfile (its event loop thread's CPU time) and
writes the stats to FILE when it stops.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

from common import (
    ROOT,
    bench_env,
    control_plane,
    django_setup,
    free_port,
    percentile,
    wait_until_answering,
)
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

RECORD_BYTES = 1024
MIB = 1024 * 1024
REGION = "us-east-1"
# moto's server and every boto3 client here: dummy credentials, never the machine's own.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
}
RAW_PREFIX = "bench-raw-put/"
WINDOW_BYTES = 32 * MIB  # records a producer holds unacknowledged


def split_cpus(store: str | None) -> tuple[set[int] | None, set[int] | None]:
    """`--store-cpus` as (the store's CPUs, everyone else's); (None, None) when not given."""
    if not store:
        return None, None
    mine = {int(cpu) for cpu in store.split(",")}
    available = os.sched_getaffinity(0)
    rest = available - mine
    if not mine <= available or not rest:
        raise SystemExit(f"--store-cpus {store}: this machine's CPUs are {sorted(available)}")
    return mine, rest


@contextlib.contextmanager
def moto_server(logs: Path, cpus: set[int] | None = None) -> Iterator[str]:
    """moto's S3 server in its own process (not sharing the bench's GIL), on `cpus` when
    given; its endpoint."""
    port = free_port()
    log = open(logs / "moto.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, **AWS_ENV},
        stdout=log,
        stderr=log,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,  # noqa: PLW1509
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(endpoint + "/moto-api/", proc, 30, "moto", log=logs / "moto.log")
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(15)


def s3_client(endpoint: str):
    """The agent's own S3 client (core/storage/s3.py), so the raw PUTs cost the same
    (with `crc32c_checksum`, as the agent's PUTs are sent)."""
    from core.storage.s3 import new_client

    os.environ.update(AWS_ENV)
    return new_client(REGION, endpoint)


def list_sizes(client, bucket: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", ()):
            sizes[item["Key"]] = item["Size"]
    return sizes


def delete_keys(client, bucket: str, keys: list[str]) -> None:
    """Keep moto's memory bounded: nothing reads the files back."""
    for start in range(0, len(keys), 1000):
        chunk = keys[start : start + 1000]
        client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
        )


def raw_put_limit(client, bucket: str, sizes: list[int], concurrency: int, seconds: float) -> dict:
    """PUT objects of `sizes` (cycled), `concurrency` at a time, for `seconds`; MiB/s."""
    from core.storage.s3 import crc32c_checksum

    payloads = [bytes(size) for size in sizes]
    done = [0, 0]  # bytes, objects
    latencies: list[float] = []
    lock = threading.Lock()
    started = time.perf_counter()

    def work(n: int) -> None:
        index = n
        while time.perf_counter() - started < seconds:
            body = payloads[index % len(payloads)]
            put_started = time.perf_counter()
            client.put_object(
                Bucket=bucket, Key=f"{RAW_PREFIX}{n}-{index}", Body=body, **crc32c_checksum(body)
            )
            with lock:
                latencies.append(time.perf_counter() - put_started)
                done[0] += len(body)
                done[1] += 1
            index += concurrency

    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(work, n) for n in range(concurrency)]:
            future.result()
    elapsed = time.perf_counter() - started
    delete_keys(client, bucket, [k for k in list_sizes(client, bucket) if k.startswith(RAW_PREFIX)])
    return {
        "concurrency": concurrency,
        "objects": done[1],
        "seconds": round(elapsed, 2),
        "put_p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "mib_per_s": round(done[0] / MIB / elapsed, 1),
    }


_START: tuple = ()  # (ready semaphore, go event) in a producer process


def _producer_init(ready, go, nice: int) -> None:
    global _START
    _START = (ready, go)
    # The producers stand for clients on machines of their own: niced, they take the
    # agent's core only when the agent does not want it (see --producer-nice).
    if nice:
        os.nice(nice)


def _producer_process(
    bootstrap: str, topic: str, partitions: int, seconds: float, n: int
) -> tuple[int, int, float]:
    """One producer process's phase: wait for `go`, produce flat out for `seconds` (whole
    batches of 1 KiB records, partitions in turn), flush; records delivered and failed,
    and the fraction of the time its window was full (held back by the agent)."""
    failed = [0]

    def report(err, _msg) -> None:  # failures only (delivery.report.only.error)
        failed[0] += 1

    prod = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            # A window of a few flush times' worth (deeper ones only lengthen the drain at
            # the end of a phase: 96 MiB measured no better, with a 15 s drain).
            "queue.buffering.max.kbytes": WINDOW_BYTES // 1024,
            "queue.buffering.max.messages": 2 * WINDOW_BYTES // RECORD_BYTES,
            "message.timeout.ms": 60000,
            # No Python call per acknowledged record: the producers' CPU is for sending.
            "delivery.report.only.error": True,
        }
    )
    prod.list_topics(topic, timeout=30)  # metadata and connection before the clock starts
    batch = [{"value": bytes(RECORD_BYTES)}] * 500
    ready, go = _START
    ready.release()
    go.wait(60)
    started = time.perf_counter()
    partition, sent, waited = n, 0, 0.0
    while time.perf_counter() - started < seconds:
        if len(prod) > WINDOW_BYTES // RECORD_BYTES - 2 * len(batch):  # never half-queue
            prod.poll(0.005)
            waited += 0.005
            continue
        try:
            sent += prod.produce_batch(
                topic, batch, partition=partition % partitions, on_delivery=report
            )
            partition += 1
        except BufferError:  # (counted as not sent: understates, never overstates)
            prod.poll(0.005)
        prod.poll(0)
    undelivered = prod.flush(60)
    return sent - failed[0] - undelivered, failed[0] + undelivered, waited / seconds


def produce(
    bootstrap: str, topic: str, partitions: int, producers: int, seconds: float, nice: int
) -> dict:
    """`producers` processes (each its own producer, so none waits on another's GIL, at
    niceness `nice`) flat out; MiB/s of records acknowledged (delivery reports), first
    send → last flush."""
    context = multiprocessing.get_context("spawn")
    ready, go = context.Semaphore(0), context.Event()
    with ProcessPoolExecutor(
        producers, mp_context=context, initializer=_producer_init, initargs=(ready, go, nice)
    ) as pool:
        futures = [
            pool.submit(_producer_process, bootstrap, topic, partitions, seconds, n)
            for n in range(producers)
        ]
        for _ in range(producers):
            if not ready.acquire(timeout=60):
                raise RuntimeError("a producer process did not start")
        started = time.perf_counter()
        go.set()
        outcomes = [f.result(timeout=seconds + 120) for f in futures]
        elapsed = time.perf_counter() - started
    records = sum(ok for ok, _, _ in outcomes)
    return {
        "producers": producers,
        "records": records,
        "failed": sum(failed for _, failed, _ in outcomes),
        "window_full_fraction": round(statistics.fmean(w for _, _, w in outcomes), 2),
        "seconds": round(elapsed, 2),
        "mib_per_s": round(records * RECORD_BYTES / MIB / elapsed, 1),
    }


_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? ([-+\d.eE]+|NaN|[+-]Inf)$")


def agent_metrics(http: str) -> dict[str, float]:
    """The agent's /metrics as {name{labels}: value}."""
    with urllib.request.urlopen(http + "/metrics", timeout=10) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            values[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return values


def breakdown(before: dict[str, float], after: dict[str, float], elapsed: float) -> dict:
    """Where the produce phase's time went, from the agent's metric deltas."""

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    def mean_ms(metric: str, label: str = '{outcome="ok"}') -> float | None:
        count = delta(f"{metric}_count{label}")
        return round(delta(f"{metric}_sum{label}") / count * 1000, 1) if count else None

    put_busy = delta('floe_segment_put_seconds_sum{outcome="ok"}')
    return {
        "segments": int(delta('floe_segments_total{outcome="ok"}')),
        "flush_reasons": {
            reason: int(delta(f'floe_segment_flush_reason_total{{reason="{reason}"}}'))
            for reason in ("size", "age", "shutdown")
        },
        "put_slot_wait_ms_mean": mean_ms("floe_segment_put_slot_wait_seconds", ""),
        "encode_ms_mean": mean_ms("floe_segment_encode_seconds", ""),
        "put_ms_mean": mean_ms("floe_segment_put_seconds"),
        "commit_wait_ms_mean": mean_ms("floe_segment_commit_wait_seconds", ""),
        "commit_ms_mean": mean_ms("floe_segment_commit_seconds"),
        "flush_ms_mean": mean_ms("floe_segment_flush_seconds"),
        "puts_in_flight_mean": round(put_busy / elapsed, 2),
        "commits_busy_fraction": round(
            delta('floe_segment_commit_seconds_sum{outcome="ok"}') / elapsed, 2
        ),
        "agent_cpu_fraction": round(delta("process_cpu_seconds_total") / elapsed, 2),
    }


# The agent under cProfile timed by the event loop thread's CPU time (on a loaded machine
# wall time mostly measures waiting for a core).
_PROFILED = """
import cProfile, sys, time
from agents.__main__ import main
profile = cProfile.Profile(time.thread_time)
try:
    profile.runcall(main, sys.argv[2:])
finally:
    profile.dump_stats(sys.argv[1])
"""


def start_agent(url: str, key: str, bucket_url: str, logs: Path, profile: str | None):
    http_port = free_port()
    log = open(logs / "agent.log", "wb")  # noqa: SIM115
    prefix = [sys.executable] + (["-c", _PROFILED, profile] if profile else ["-m", "agents"])
    proc = subprocess.Popen(
        [*prefix, "--control-plane-url", url, "--agent-key", key,
         "--bucket-url", bucket_url, "--kafka-port", "0", "--http-port", str(http_port),
         "--schema-registry-port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ, **AWS_ENV},
    )  # fmt: skip
    assert proc.stdout is not None
    match = re.search(r"serving Kafka on (\S+) for", proc.stdout.readline())
    if not match:
        proc.kill()
        raise RuntimeError(f"agent did not start; see {log.name}")
    return proc, match.group(1), f"http://127.0.0.1:{http_port}"


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
    return found


def process_cpu() -> dict[str, float]:
    """CPU seconds (user + system, every thread) of this bench process with its producer
    processes and raw PUT client, and of each server it started, by role."""
    tick = os.sysconf("SC_CLK_TCK")
    usage = os.times()
    # Children's times count once reaped: the producer processes, at the end of a phase.
    cpu = {"bench": usage.user + usage.system + usage.children_user + usage.children_system}
    pending = _children_of(os.getpid())
    while pending:
        pid = pending.pop()
        pending += _children_of(pid)
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            seconds = (int(fields[11]) + int(fields[12])) / tick
            role = (
                "moto" if "moto" in cmdline else "agent" if "agents" in cmdline
                else "control_plane" if "uvicorn" in cmdline or "webserver" in cmdline
                else None
            )  # fmt: skip
            if role:  # (producer processes: in "bench" once reaped)
                cpu[role] = cpu.get(role, 0.0) + seconds
    return cpu


def cpu_fractions(before: dict[str, float], after: dict[str, float], elapsed: float) -> dict:
    """Cores used on average by each role over a phase."""
    return {
        role: round((after.get(role, 0.0) - before.get(role, 0.0)) / elapsed, 2)
        for role in sorted(after)
    }


def size_summary(sizes: list[int]) -> dict:
    if not sizes:
        return {"files": 0}
    return {
        "files": len(sizes),
        "p10_kib": round(percentile(sizes, 10) / 1024),
        "p50_kib": round(percentile(sizes, 50) / 1024),
        "p90_kib": round(percentile(sizes, 90) / 1024),
        "mean_kib": round(statistics.fmean(sizes) / 1024),
    }


def run(args, url: str, key: str, endpoint: str, logs: Path) -> dict:
    client = s3_client(endpoint)
    bucket = "floe-bench-s3-produce"
    client.create_bucket(Bucket=bucket)
    bucket_url = f"s3://{bucket}?endpoint={endpoint}&region={REGION}"
    proc, bootstrap, http = start_agent(url, key, bucket_url, logs, args.profile)
    rounds = []
    try:
        # The agent's own PUT concurrency, as it reports it (agents/segment_upload.py).
        slots = agent_metrics(http).get("floe_segment_put_slots")
        concurrency = args.put_concurrency or int(slots or 0)
        if not concurrency:
            raise RuntimeError("the agent reports no floe_segment_put_slots: --put-concurrency")
        topic = f"s3-produce-{int(time.time())}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
            future.result(30)
        produce(  # warm-up
            bootstrap, topic, args.partitions, args.producers, 2.0, args.producer_nice
        )
        written = list_sizes(client, bucket)
        sizes = list(written.values())
        delete_keys(client, bucket, list(written))

        def raw_phase() -> dict:
            cpu = process_cpu()
            raw = raw_put_limit(client, bucket, sizes, concurrency, args.seconds)
            raw["cores"] = cpu_fractions(cpu, process_cpu(), raw["seconds"])
            return raw

        for number in range(1, args.rounds + 1):
            raw = raw_phase()
            raw["file_sizes"] = size_summary(sizes)
            before, cpu = agent_metrics(http), process_cpu()
            floe = produce(
                bootstrap, topic, args.partitions, args.producers, args.seconds, args.producer_nice
            )
            after = agent_metrics(http)
            cpu_after = process_cpu()
            floe["cores"] = cpu_fractions(cpu, cpu_after, floe["seconds"])
            floe["breakdown"] = breakdown(before, after, floe["seconds"])
            written = list_sizes(client, bucket)
            sizes = list(written.values()) or sizes
            floe["file_sizes"] = size_summary(list(written.values()))
            # The agent's CPU per MiB acknowledged (every thread: the loop's framing and
            # checks, the upload threads' segment building and PUTs).
            floe["agent_cpu_ms_per_mib"] = round(
                (cpu_after.get("agent", 0.0) - cpu.get("agent", 0.0))
                * 1000
                / max(floe["records"] * RECORD_BYTES / MIB, 1e-9),
                2,
            )
            delete_keys(client, bucket, list(written))
            if rounds:  # the limit measured after the previous round's produce phase
                rounds[-1]["raw_put_after"] = raw
            result = {
                "round": number,
                "load_1m": round(os.getloadavg()[0], 2),
                "raw_put": raw,
                "produce": floe,
                "ratio": round(floe["mib_per_s"] / raw["mib_per_s"], 2),
            }
            rounds.append(result)
            print(json.dumps(result), file=sys.stderr, flush=True)
        # One more limit after the last produce phase: each round's produce also stands
        # between the limits measured just before and just after it.
        rounds[-1]["raw_put_after"] = raw_phase()
    finally:
        proc.terminate()
        proc.wait(60)
    ratios = [r["ratio"] for r in rounds]
    for r in rounds:
        around = (r["raw_put"]["mib_per_s"] + r["raw_put_after"]["mib_per_s"]) / 2
        r["ratio_bracketed"] = round(r["produce"]["mib_per_s"] / around, 2)
    bracketed = [r["ratio_bracketed"] for r in rounds]
    return {
        "record_bytes": RECORD_BYTES,
        "partitions": args.partitions,
        "seconds_per_phase": args.seconds,
        "put_concurrency": concurrency,
        "rounds": rounds,
        "ratios": ratios,
        "min_ratio": min(ratios),
        "agent_cpu_ms_per_mib": [r["produce"]["agent_cpu_ms_per_mib"] for r in rounds],
        "every_round_at_least_0_8": min(ratios) >= 0.8,
        "ratios_bracketed": bracketed,
        "every_round_at_least_0_8_bracketed": min(bracketed) >= 0.8,
        "raw_put_mib_per_s": [r["raw_put"]["mib_per_s"] for r in rounds]
        + [rounds[-1]["raw_put_after"]["mib_per_s"]],
        "produce_mib_per_s": [r["produce"]["mib_per_s"] for r in rounds],
        "store_cpus": sorted(args.store_cpus_set) if args.store_cpus_set else "shared",
        "producer_nice": args.producer_nice,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--producers", type=int, default=8, help="producer processes")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--put-concurrency", type=int, help="default: the agent's own")
    parser.add_argument("--store-cpus", help="pin moto to these CPUs, everything else to the rest")
    parser.add_argument(
        "--producer-nice",
        type=int,
        default=10,
        help="niceness of the producer processes (0: the same as the agent's)",
    )
    parser.add_argument("--profile", help="run the agent under cProfile, stats to this file")
    args = parser.parse_args()
    args.store_cpus_set, floe_cpus = split_cpus(args.store_cpus)
    if floe_cpus:
        os.sched_setaffinity(0, floe_cpus)  # inherited by every process started from here
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-s3-produce-"))
    env = bench_env(data_dir, database=os.environ.get("FLOE_BENCH_DATABASE", "floe_bench_s3"))
    django_setup(env)
    from tests.factories import make_cluster

    _, key = make_cluster("bench-s3-produce")
    with moto_server(data_dir, args.store_cpus_set) as endpoint, control_plane(env) as url:
        result = run(args, url, key, endpoint, data_dir)
    result["command"] = "bench/s3_produce.py " + " ".join(sys.argv[1:])
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
