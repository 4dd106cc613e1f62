"""The agent's Prometheus metrics, on `prometheus_client`, in the agent's own registry.

Metrics are module-level objects created at import time. The small classes here keep
the call style the agent's code uses (`inc(amount, *label_values)`,
`observe(value, *label_values)`) and read their own values back for the heartbeat
(`value`, `total`, `items`). The registry also carries `floe_build_info` and the
process metrics (`process_*`, `python_info`). Label-less counters show 0 from the
start; error codes are labelled by their names (`error_label`). A Fetch's long-poll
wait is reported by the read path (`long_poll_waited`) and kept out of the request
latency (`request_timer`).
"""

from __future__ import annotations

import contextvars
import platform
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import prometheus_client
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.metrics import MetricWrapperBase

from agents import AGENT_VERSION
from core.kafka.errors import ErrorCode

# `<name>_created` series (a timestamp per series) say nothing a scrape needs.
prometheus_client.disable_created_metrics()

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

# Fine around 50-500 ms, where batch timeouts put produce latencies.
_LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4,
    0.5, 0.75, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
_SIZE_BUCKETS = tuple(float(1 << n) for n in range(10, 28, 2))  # 1 KiB … 128 MiB


_Wrapped = TypeVar("_Wrapped", bound=MetricWrapperBase)


class _Metric(Generic[_Wrapped]):
    _metric: _Wrapped  # the prometheus_client metric, set by the subclass

    def __init__(self, name: str, labels: Sequence[str]) -> None:
        self.name = name
        self.labels = tuple(labels)
        # Each label set's child, looked up once (prometheus_client's `labels()` checks
        # and converts its arguments and takes a lock on every call: hot paths count).
        self._children: dict[tuple[object, ...], _Wrapped] = {}

    def _series(self, labels: Sequence[object]) -> _Wrapped:
        if not self.labels:
            return self._metric
        key = tuple(labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._metric.labels(*labels)
        return child

    def _samples(self, suffix: str = "") -> list[tuple[tuple[str, ...], float]]:
        """(label values, value) of the samples named `name + suffix`."""
        wanted = self.name + suffix
        return [
            (tuple(s.labels[label] for label in self.labels), s.value)
            for family in self._metric.collect()
            for s in family.samples
            if s.name == wanted
        ]

    def value(self, *labels: object) -> float:
        key = tuple(str(v) for v in labels)
        return sum(v for k, v in self._samples() if k == key)


class Counter(_Metric[prometheus_client.Counter]):
    """A monotonically increasing number per label set (the name ends in `_total`)."""

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, labels)
        self._metric = prometheus_client.Counter(name, help_text, labels, registry=REGISTRY)

    def inc(self, amount: float = 1.0, *labels: object) -> None:
        """Add `amount` to the series named by `labels` (in declaration order)."""
        self._series(labels).inc(amount)

    def total(self) -> float:
        """The sum over every label set."""
        return sum(v for _, v in self._samples())

    def items(self) -> list[tuple[tuple[str, ...], float]]:
        """(label values, value) for every series."""
        return self._samples()


class Gauge(_Metric[prometheus_client.Gauge]):
    """A number that goes up and down, or a callback read at scrape time."""

    def __init__(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        callback: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(name, labels)
        self._metric = prometheus_client.Gauge(name, help_text, labels, registry=REGISTRY)
        if callback is not None:
            self._metric.set_function(callback)

    def set(self, value: float, *labels: object) -> None:
        self._series(labels).set(value)

    def inc(self, amount: float = 1.0, *labels: object) -> None:
        self._series(labels).inc(amount)


class Histogram(_Metric[prometheus_client.Histogram]):
    """Cumulative buckets, sum and count per label set."""

    def __init__(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = _LATENCY_BUCKETS,
    ) -> None:
        super().__init__(name, labels)
        self._metric = prometheus_client.Histogram(
            name, help_text, labels, buckets=buckets, registry=REGISTRY
        )

    def observe(self, value: float, *labels: object) -> None:
        """Count `value` in the series named by `labels` (in declaration order)."""
        self._series(labels).observe(value)

    def count(self, *labels: object) -> int:
        key = tuple(str(v) for v in labels)
        return int(sum(v for k, v in self._samples("_count") if k == key))

    def total_count(self) -> int:
        """Observations over every label set."""
        return int(sum(v for _, v in self._samples("_count")))

    def total_sum(self) -> float:
        """The sum of the observed values over every label set."""
        return sum(v for _, v in self._samples("_sum"))


def size_histogram(name: str, help_text: str, labels: Sequence[str] = ()) -> Histogram:
    """A histogram with power-of-four byte-size buckets (1 KiB … 128 MiB)."""
    return Histogram(name, help_text, labels, buckets=_SIZE_BUCKETS)


_BUILD_INFO = Gauge(
    "floe_build_info", "The agent's version (always 1).", ("version", "python_version")
)
_BUILD_INFO.set(1, AGENT_VERSION, platform.python_version())


def error_label(code: int) -> str:
    """A Kafka error code as a label value: its name (`NONE`, `NOT_LEADER_OR_FOLLOWER`…),
    or the number for a code this agent does not know."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# The long-poll wait of the request being handled: a list the read path adds to.
_WAITED: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "floe_long_poll_waited", default=None
)


def long_poll_waited(seconds: float) -> None:
    """The request being handled waited `seconds` for data (a Fetch's `max_wait_ms`):
    not handling time, so `request_timer` leaves it out."""
    waited = _WAITED.get()
    if waited is not None:
        waited[0] += seconds


def request_timer(histogram: Histogram, *labels: object) -> RequestTimer:
    """Observe the time the block takes, less the long-poll waits within it."""
    return RequestTimer(histogram, labels)


class RequestTimer:
    """`request_timer`'s context manager (a class, not a generator: every request goes
    through one)."""

    __slots__ = ("histogram", "labels", "waited", "token", "started")
    waited: list[float]
    token: contextvars.Token[list[float] | None]
    started: float

    def __init__(self, histogram: Histogram, labels: tuple[object, ...]) -> None:
        self.histogram = histogram
        self.labels = labels

    def __enter__(self) -> None:
        self.waited = [0.0]
        self.token = _WAITED.set(self.waited)
        self.started = time.perf_counter()

    def __exit__(self, *_: object) -> None:
        _WAITED.reset(self.token)
        elapsed = time.perf_counter() - self.started - self.waited[0]
        self.histogram.observe(max(0.0, elapsed), *self.labels)


def render_all() -> str:
    """Every registered metric in Prometheus text exposition format 0.0.4."""
    return prometheus_client.generate_latest(REGISTRY).decode("utf-8")
