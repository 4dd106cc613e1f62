"""The agent's thread pools for blocking I/O, one per kind of work, each timing how long
its tasks wait for a thread (`floe_io_thread_wait_seconds{pool}`).

Three pools, so that one kind of work never queues behind another:

- ``put``: the write path's PUTs (segments and journal entries, `agents/write_path.py`),
  as many threads as `UploadSlots` lets PUTs be in flight and one for the journal's
  marker, so a PUT never waits for a thread;
- ``read``: the read path's ranged GETs (`agents/zone_cache.py`), few at a time: a
  consumer group catching up after a Ripcord outage filled a shared 16-thread pool
  with GETs, and the PUTs answering producers waited behind them — for a thread, and at
  the bucket, whose answers slow down with the GETs in flight (moto: a PUT beside 32
  looping GETs took 172 ms on average, beside 4 36 ms, while 4 GETs at a time read as
  many per second as 16);
- ``io``: everything else (the journal keeper's bucket calls, the schema registry's reads).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

from agents.metrics import Gauge, Histogram

# Ranged GETs of the read path in flight at once per agent (see the module docstring).
# A chunk is up to 4 MiB: against a real bucket 4 at a time still read hundreds of MiB/s.
GETS_IN_FLIGHT = 4
OTHER_IO_THREADS = 16

_T = TypeVar("_T")

THREAD_WAIT_SECONDS = Histogram(
    "floe_io_thread_wait_seconds",
    "From a blocking I/O task's submission to a thread of its pool starting it, by pool"
    " (put: segment and journal PUTs; read: the read path's GETs; io: the rest).",
    ("pool",),
)
THREADS = Gauge("floe_io_threads", "Threads of each blocking I/O pool.", ("pool",))


class TimedPool(Executor):
    """A `ThreadPoolExecutor` of `threads` named ``floe-<name>`` whose tasks' waits for a
    thread are observed in `THREAD_WAIT_SECONDS` (usable wherever an `Executor` is, e.g.
    `loop.run_in_executor`)."""

    def __init__(self, name: str, threads: int) -> None:
        self.name = name
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"floe-{name}")
        THREADS.set(threads, name)

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        queued = time.perf_counter()

        def timed() -> _T:
            THREAD_WAIT_SECONDS.observe(time.perf_counter() - queued, self.name)
            return fn(*args, **kwargs)

        return self._pool.submit(timed)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)


class IoPools:
    """The three pools of one agent process (module docstring)."""

    def __init__(self, *, put_threads: int, read_threads: int = GETS_IN_FLIGHT) -> None:
        self.put = TimedPool("put", put_threads)
        self.read = TimedPool("read", read_threads)
        self.io = TimedPool("io", OTHER_IO_THREADS)

    def shutdown(self) -> None:
        """Stop every pool without waiting; queued tasks are cancelled."""
        for pool in (self.put, self.read, self.io):
            pool.shutdown(wait=False, cancel_futures=True)
