"""Wire codec micro-benchmarks; prints one JSON object.

    cd bench && ../.venv/bin/python protocol_decode.py [--seconds 1.0]

* decode_request of a Produce v9 request: 12 partitions × 16 KiB record blobs
* encode_response of a Fetch v13 response: 12 partitions × 64 KiB of records
* encode_response of a Metadata v12 response: 100 topics × 12 partitions
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from core.kafka import ApiKey, RequestHeader, decode_request, encode_request, encode_response

MIB = 1024 * 1024


def _rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second, measured over batches until ``seconds`` have passed."""
    fn()  # warm up (compiles the codec)
    calls, batch, elapsed = 0, 1, 0.0
    start = time.perf_counter()
    while elapsed < seconds:
        for _ in range(batch):
            fn()
        calls += batch
        batch = min(batch * 2, 4096)
        elapsed = time.perf_counter() - start
    return calls / elapsed


def produce_v9_frame() -> bytes:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": "bench-topic",
                "partition_data": [
                    {"index": i, "records": os.urandom(16 * 1024)} for i in range(12)
                ],
            }
        ],
    }
    return encode_request(ApiKey.PRODUCE, 9, 1, "bench", body)[4:]


def fetch_v13_response() -> tuple[RequestHeader, dict]:
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 12,
        "responses": [
            {
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {
                        "partition_index": i,
                        "high_watermark": 1_000_000,
                        "last_stable_offset": 1_000_000,
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "records": os.urandom(64 * 1024),
                    }
                    for i in range(12)
                ],
            }
        ],
    }
    return RequestHeader(ApiKey.FETCH, 13, 1, "bench"), body


def metadata_v12_response() -> tuple[RequestHeader, dict]:
    brokers = [{"node_id": n, "host": f"agent-{n}.floe.internal", "port": 9092} for n in range(3)]
    topics = [
        {
            "error_code": 0,
            "name": f"topic-{t:03d}",
            "topic_id": uuid.uuid4(),
            "is_internal": False,
            "partitions": [
                {
                    "error_code": 0,
                    "partition_index": p,
                    "leader_id": p % 3,
                    "leader_epoch": 0,
                    "replica_nodes": [p % 3],
                    "isr_nodes": [p % 3],
                    "offline_replicas": [],
                }
                for p in range(12)
            ],
        }
        for t in range(100)
    ]
    body = {"brokers": brokers, "cluster_id": "bench", "controller_id": 0, "topics": topics}
    return RequestHeader(ApiKey.METADATA, 12, 1, "bench"), body


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per benchmark")
    args = parser.parse_args(argv)

    produce = produce_v9_frame()
    produce_ops = _rate(lambda: decode_request(produce), args.seconds)

    fetch_header, fetch_body = fetch_v13_response()
    fetch_size = len(encode_response(fetch_header, fetch_body))
    fetch_ops = _rate(lambda: encode_response(fetch_header, fetch_body), args.seconds)

    metadata_header, metadata_body = metadata_v12_response()
    metadata_size = len(encode_response(metadata_header, metadata_body))
    metadata_ops = _rate(lambda: encode_response(metadata_header, metadata_body), args.seconds)

    result = {
        "python": platform.python_version(),
        "produce_v9_decode_request": {
            "frame_bytes": len(produce),
            "ops_per_s": round(produce_ops),
            "mib_per_s": round(produce_ops * len(produce) / MIB, 1),
        },
        "fetch_v13_encode_response": {
            "frame_bytes": fetch_size,
            "ops_per_s": round(fetch_ops),
            "mib_per_s": round(fetch_ops * fetch_size / MIB, 1),
        },
        "metadata_v12_encode_response": {
            "frame_bytes": metadata_size,
            "topics": 100,
            "partitions_per_topic": 12,
            "ops_per_s": round(metadata_ops, 1),
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
