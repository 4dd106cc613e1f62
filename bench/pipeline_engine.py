"""How fast the pipelines' engine is alone (no Kafka, no agent), on this machine.

    .venv/bin/python -m bench.pipeline_engine [--records 50000] [--repeat 5]

Runs 1 KiB JSON records through `CompiledPipeline.process_batch` for three pipelines —
`map_filter` (parse_json → set → filter → encode_json), `map_whole` (parse_json → map
building a new value → filter → encode_json) and `route` (parse_json → route by a field to
two outputs → encode_json) — and prints one JSON object: for each, the best of `--repeat`
runs in records/s and µs per record, with the machine's load average beside them (the
machine is shared: read the numbers with it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

from core.pipelines import InRecord, compile_spec, parse_config

PIPELINES = {
    "map_filter": """
input: {kafka: {topics: [orders]}}
processors:
  - parse_json: {}
  - set: {total: 'value.amount * value.quantity', big: 'value.amount >= 50'}
  - filter: 'value.amount > 10 && value.status != "cancelled"'
  - encode_json: {}
outputs: {default: {kafka: {topic: orders-clean}}}
""",
    "map_whole": """
input: {kafka: {topics: [orders]}}
processors:
  - parse_json: {}
  - map: '{"id": value.id, "total": value.amount * value.quantity, "region": value.region}'
  - filter: 'value.total > 100'
  - encode_json: {}
outputs: {default: {kafka: {topic: orders-small}}}
""",
    "route": """
input: {kafka: {topics: [orders]}}
processors:
  - parse_json: {}
  - remove: [customer.email]
  - route:
      cases:
        - when: 'value.region == "eu"'
          output: eu
  - encode_json: {}
outputs:
  default: {kafka: {topic: orders-rest}}
  eu: {kafka: {topic: orders-eu}}
""",
}


def sample_records(count: int) -> list[InRecord]:
    """`count` JSON records of about 1 KiB each (an order with its lines and customer)."""
    rng = random.Random(7)
    out = []
    for n in range(count):
        value = {
            "id": n,
            "amount": rng.randint(0, 100),
            "quantity": rng.randint(1, 9),
            "status": rng.choice(["new", "paid", "cancelled"]),
            "region": rng.choice(["eu", "us", "apac"]),
            "customer": {
                "name": f"customer-{n % 977}",
                "email": f"c{n % 977}@example.com",
                "tier": rng.choice(["gold", "silver"]),
            },
            "lines": [
                {"sku": f"sku-{rng.randint(0, 9999):04d}", "qty": rng.randint(1, 5), "price": 9.5}
                for _ in range(8)
            ],
            "note": "x" * 420,
        }
        raw = json.dumps(value).encode()
        out.append(InRecord("orders", n % 8, n, 1_700_000_000_000 + n, str(n).encode(), raw, ()))
    return out


def measure(text: str, records: list[InRecord], repeat: int) -> dict[str, float]:
    compiled = compile_spec(parse_config(text))
    compiled.process_batch(records[:1000])  # warm up
    best = best_cpu = float("inf")
    emitted = errors = 0
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        results = compiled.process_batch(records)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
        emitted = sum(len(r) for r in results if isinstance(r, list))
        errors = sum(1 for r in results if not isinstance(r, list))
    return {
        "records_per_s": round(len(records) / best),
        "us_per_record": round(best / len(records) * 1e6, 2),
        # CPU time of this process alone: what the records cost on a machine to itself.
        "records_per_cpu_s": round(len(records) / best_cpu),
        "cpu_us_per_record": round(best_cpu / len(records) * 1e6, 2),
        "emitted": emitted,
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    records = sample_records(args.records)
    sizes = [len(r.value or b"") for r in records]
    result: dict[str, object] = {
        "records": args.records,
        "mean_value_bytes": round(sum(sizes) / len(sizes)),
        "load_average_before": os.getloadavg(),
    }
    for name, text in PIPELINES.items():
        result[name] = measure(text, records, args.repeat)
    result["load_average_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
