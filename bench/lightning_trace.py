"""Where a produce's acknowledgement time goes: bench/lightning.py's runs with the agent
timestamping each step (perf_counter), then the breakdown.

The agent runs under this file (``agent`` mode), which wraps — without changing — the
write path's steps and the Kafka connection: each produce frame's arrival and the
writing of its response, each request's append and answer, each segment's open, seal
(and how late its age timer fired), the worker thread taking it (executor queue), the
layout + PUT, and the event loop taking the PUT's completion (`_journaled_now`). A
task sleeps 10 ms in a loop on the agent's event loop and notes how late it wakes and
how much CPU the whole process used meanwhile: a loop late with its process idle is
waiting for a CPU, not busy. The driver runs bench/lightning.py's `run_bucket` with that
agent and prints, per run and topic type, the percentiles of each step and the mean
breakdown of the slowest 1 % of requests, as one JSON object.

    .venv/bin/python bench/lightning_trace.py [--buckets file,s3] [--flush-ages 250,5]
                                              [--seconds 5] [--rate 500]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LOOP_TICK_S = 0.01


def _traced_agent(argv: list[str]) -> int:
    """Run the agent with the write path's steps timestamped; dump to $FLOE_TRACE_OUT."""
    import asyncio
    import atexit

    sys.path.insert(0, str(ROOT))
    from agents import server, write_path
    from agents.__main__ import main

    now = time.perf_counter
    segments: dict[Any, dict[str, Any]] = {}
    requests: list[dict[str, Any]] = []
    frames: list[tuple[int, float, int]] = []
    writes: list[tuple[int, float, int]] = []
    lags: list[tuple[float, float, float]] = []
    writer = write_path.SegmentWriter
    connection = server.KafkaConnection

    def trace(segment) -> dict[str, Any]:
        return segments.setdefault(segment, {"n": len(segments)})

    def wrap(cls, name, before=None, after=None):
        original = getattr(cls, name)

        def wrapped(self, *args, **kwargs):
            if before:
                before(self, *args)
            result = original(self, *args, **kwargs)
            if after:
                after(self, result, *args)
            return result

        setattr(cls, name, wrapped)

    def appended(self, future, batches) -> None:
        target = self._open  # the request's segment: open, or just sealed by size
        for segment in [self._open, *self._unanswered]:
            if segment is not None and any(w[0] is future for w in segment.waiters):
                target = segment
                break
        seg = trace(target)
        seg.setdefault("open", now())
        request = {"append": now(), "seg": seg["n"], "lightning": all(b.lightning for b in batches)}
        requests.append(request)
        if future is not None:
            future.add_done_callback(lambda _, r=request: r.__setitem__("answered", now()))

    def timer_fired(self, segment) -> None:
        seg = trace(segment)
        if segment.timer is not None and "timer_late" not in seg:
            seg["timer_late"] = asyncio.get_running_loop().time() - segment.timer.when()

    def sealing(self, _reason) -> None:
        if self._open is not None:
            trace(self._open)["seal"] = now()

    wrap(writer, "append", after=lambda self, fut, batches: appended(self, fut, batches))
    wrap(writer, "_seal_if_open", before=timer_fired)
    wrap(writer, "_seal", before=sealing)
    wrap(
        writer,
        "_finish_and_put",
        before=lambda self, key, seg: trace(seg).__setitem__("thread_start", now()),
        after=lambda self, _, key, seg: trace(seg).__setitem__("put_done", now()),
    )
    wrap(
        writer,
        "_journaled_now",
        before=lambda self, seg, size: trace(seg).__setitem__("journaled", now()),
    )
    wrap(connection, "_on_frame", before=lambda self, f: frames.append((id(self), now(), len(f))))
    original_write = connection._write_ready

    def write_ready(self) -> None:
        waiting = len(self._pending)
        original_write(self)
        writes.append((id(self), now(), waiting - len(self._pending)))

    connection._write_ready = write_ready  # type: ignore[method-assign]

    async def loop_lag() -> None:
        while True:
            started, cpu = now(), time.process_time()
            await asyncio.sleep(LOOP_TICK_S)
            late = now() - started - LOOP_TICK_S
            lags.append((started, late, time.process_time() - cpu))

    run = asyncio.run

    def run_with_probe(coro, **kwargs):
        async def both():
            probe = asyncio.get_running_loop().create_task(loop_lag())
            try:
                return await coro
            finally:
                probe.cancel()

        return run(both(), **kwargs)

    asyncio.run = run_with_probe  # type: ignore[assignment]

    def dump() -> None:
        by_number = {str(v["n"]): v for v in segments.values()}
        with open(os.environ["FLOE_TRACE_OUT"], "w") as out:
            json.dump(
                {
                    "segments": by_number,
                    "requests": requests,
                    "frames": frames,
                    "writes": writes,
                    "lags": lags,
                },
                out,
            )

    atexit.register(dump)
    return main(argv)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] if ordered else 0.0


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(_pct(values, 50) * 1000, 1),
        "p99_ms": round(_pct(values, 99) * 1000, 1),
        "max_ms": round(max(values, default=0.0) * 1000, 1),
    }


def breakdown(trace: dict[str, Any]) -> dict[str, Any]:
    """Per topic type: each step's percentiles and the slowest 1 %'s mean breakdown."""
    segments = trace["segments"]
    frames, written = defaultdict(list), defaultdict(list)
    for conn, at, size in trace["frames"]:
        frames[conn].append((at, size))
    for conn, at, count in trace["writes"]:
        written[conn].extend([at] * count)
    # Responses go out in request order per connection: the k-th frame's is the k-th.
    in_agent = [
        (at, out)
        for conn in frames
        for (at, size), out in zip(frames[conn], written[conn], strict=False)
        if size > 900  # produce frames (1 KiB records), not Metadata and the like
    ]
    result: dict[str, Any] = {}
    for lightning in (False, True):
        reqs = [r for r in trace["requests"] if "answered" in r and r["lightning"] == lightning]
        if not reqs:
            continue
        first, last = min(r["append"] for r in reqs), max(r["append"] for r in reqs)
        segs = [segments[str(n)] for n in sorted({r["seg"] for r in reqs})]
        segs = [s for s in segs if "seal" in s and "put_done" in s]

        def step(a: str, b: str, segs=segs) -> list[float]:
            return [s[b] - s[a] for s in segs if a in s and b in s]

        late = [(lag, cpu) for at, lag, cpu in trace["lags"] if first <= at <= last]
        very = [(lag, cpu) for lag, cpu in late if lag > 0.02]
        kind: dict[str, Any] = {
            "requests": len(reqs),
            "frame_to_response_written": _ms(
                [out - at for at, out in in_agent if first - 0.01 <= at <= last + 0.01]
            ),
            "append_to_answered": _ms([r["answered"] - r["append"] for r in reqs]),
            "segment_open_to_seal": _ms(step("open", "seal")),
            "seal_timer_late": _ms([s["timer_late"] for s in segs if "timer_late" in s]),
            "executor_queue": _ms(step("seal", "thread_start")),
            "layout_and_put": _ms(step("thread_start", "put_done")),
            "loop_tick_late": _ms([lag for lag, _ in late]),
            "ticks_late_over_20ms": len(very),
            "process_cpu_share_in_those": round(
                sum(cpu for _, cpu in very) / max(1e-9, sum(lag + LOOP_TICK_S for lag, _ in very)),
                2,
            ),
        }
        if lightning:
            kind["put_done_to_loop"] = _ms(step("put_done", "journaled"))
        slowest = sorted(reqs, key=lambda r: r["answered"] - r["append"])
        slowest = slowest[-max(1, len(reqs) // 100) :]
        parts: dict[str, list[float]] = defaultdict(list)
        for r in slowest:
            s = segments[str(r["seg"])]
            parts["in_open_segment"].append(s["seal"] - r["append"])
            parts["of_it_timer_late"].append(s.get("timer_late", 0.0))
            parts["executor_queue"].append(s["thread_start"] - s["seal"])
            parts["layout_and_put"].append(s["put_done"] - s["thread_start"])
            if lightning:
                parts["put_done_to_loop"].append(s["journaled"] - s["put_done"])
                parts["loop_to_answered"].append(r["answered"] - s["journaled"])
            else:
                parts["commit_and_answer"].append(r["answered"] - s["put_done"])
            parts["total"].append(r["answered"] - r["append"])
        kind["slowest_1pct_mean_ms"] = {
            k: round(sum(v) / len(v) * 1000, 1) for k, v in parts.items()
        }
        result["lightning" if lightning else "standard"] = kind
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument(
        "--flush-ages", type=lambda s: [int(x) for x in s.split(",")], default=[250, 5]
    )
    parser.add_argument("--buckets", default="file,s3")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    import lightning
    from common import bench_env, control_plane, django_setup

    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-lightning-trace-"))
    traces: list[Path] = []

    def start_agent(url: str, key: str, bucket_url: str, flush_ms: int, logs: Path):
        traces.append(data_dir / f"trace-{len(traces)}.json")
        log = open(logs / f"agent-{uuid.uuid4().hex[:6]}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, __file__, "agent", "--control-plane-url", url, "--agent-key", key,
             "--bucket-url", bucket_url, "--kafka-port", "0", "--http-port", "0",
             "--schema-registry-port", "0", "--batch-timeout", str(flush_ms)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
            env={**os.environ, "FLOE_TRACE_OUT": str(traces[-1])},
        )  # fmt: skip
        assert proc.stdout is not None
        match = re.search(r"serving Kafka on (\S+) for", proc.stdout.readline())
        if not match:
            proc.kill()
            raise RuntimeError(f"agent did not start; see {log.name}")
        return proc, match.group(1)

    lightning.start_agent = start_agent
    env = bench_env(data_dir, database="floe_bench_lightning_trace")
    django_setup(env)
    from tests.factories import make_cluster

    results: dict[str, Any] = {"rate": args.rate, "load_average_before": os.getloadavg()}
    runs: list[dict[str, Any]] = []
    with control_plane(env) as url:
        for kind in args.buckets.split(","):
            _, key = make_cluster(f"bench-trace-{kind}", max_flush_age_ms=max(args.flush_ages))
            if kind == "file":
                folder = data_dir / "bucket"
                folder.mkdir()
                runs += lightning.run_bucket(url, key, kind, folder.as_uri(), data_dir, args)
            else:
                with lightning.moto_bucket() as bucket_url:
                    runs += lightning.run_bucket(url, key, kind, bucket_url, data_dir, args)
    for run, path in zip(runs, traces, strict=True):
        run["in_agent"] = breakdown(json.loads(path.read_text()))
    results["runs"] = runs
    results["load_average_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    if sys.argv[1:2] == ["agent"]:
        sys.exit(_traced_agent(sys.argv[2:]))
    main()
