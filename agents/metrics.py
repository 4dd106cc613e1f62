"""A small Prometheus text-format registry: counters, gauges and histograms with labels.

Hand-rolled rather than prometheus_client to keep the agent's dependencies at stdlib +
aiohttp + boto3, and because everything here runs on one event loop thread (no locks).
Metrics are module-level objects created at import time and registered in `REGISTRY`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

# Every metric registers itself here on creation; `render_all` walks it.
REGISTRY: list[_Metric] = []

# Fine around 50-500 ms, where batch timeouts put produce latencies.
_LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4,
    0.5, 0.75, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
_SIZE_BUCKETS = tuple(float(1 << n) for n in range(10, 28, 2))  # 1 KiB … 128 MiB


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.labels = tuple(labels)
        REGISTRY.append(self)

    def _label_text(self, values: Sequence[object], extra: str = "") -> str:
        parts = [f'{k}="{_escape(str(v))}"' for k, v in zip(self.labels, values, strict=True)]
        if extra:
            parts.append(extra)
        return "{" + ",".join(parts) + "}" if parts else ""

    def render(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    """A monotonically increasing number per label set."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, labels)
        self._values: dict[tuple, float] = {}

    def inc(self, amount: float = 1.0, *labels: object) -> None:
        """Add `amount` to the series named by `labels` (in declaration order)."""
        self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: object) -> float:
        return self._values.get(labels, 0.0)

    def total(self) -> float:
        """The sum over every label set."""
        return sum(self._values.values())

    def items(self) -> list[tuple[tuple, float]]:
        """(label values, value) for every series."""
        return list(self._values.items())

    def render(self) -> list[str]:
        lines = super().render()
        for labels, value in sorted(self._values.items(), key=lambda kv: str(kv[0])):
            lines.append(f"{self.name}{self._label_text(labels)} {_number(value)}")
        return lines


class Gauge(_Metric):
    """A number that goes up and down, or a callback read at scrape time."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        callback: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(name, help_text, labels)
        self._values: dict[tuple, float] = {}
        self.callback = callback

    def set(self, value: float, *labels: object) -> None:
        self._values[labels] = value

    def inc(self, amount: float = 1.0, *labels: object) -> None:
        self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: object) -> float:
        return self._values.get(labels, 0.0)

    def render(self) -> list[str]:
        lines = super().render()
        if self.callback is not None:
            lines.append(f"{self.name} {_number(self.callback())}")
        for labels, value in sorted(self._values.items(), key=lambda kv: str(kv[0])):
            lines.append(f"{self.name}{self._label_text(labels)} {_number(value)}")
        return lines


class Histogram(_Metric):
    """Cumulative buckets, sum and count per label set."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = _LATENCY_BUCKETS,
    ) -> None:
        super().__init__(name, help_text, labels)
        self.buckets = tuple(buckets)
        # per label set: [count per bucket..., +Inf count], sum
        self._series: dict[tuple, tuple[list[int], list[float]]] = {}

    def observe(self, value: float, *labels: object) -> None:
        """Count `value` in the series named by `labels` (in declaration order)."""
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = ([0] * (len(self.buckets) + 1), [0.0])
        series[0][bisect.bisect_left(self.buckets, value)] += 1
        series[1][0] += value

    def count(self, *labels: object) -> int:
        series = self._series.get(labels)
        return sum(series[0]) if series else 0

    def render(self) -> list[str]:
        lines = super().render()
        for labels, (counts, total) in sorted(self._series.items(), key=lambda kv: str(kv[0])):
            running = 0
            for bound, count in zip((*self.buckets, float("inf")), counts, strict=True):
                running += count
                le = "+Inf" if bound == float("inf") else _number(bound)
                label_text = self._label_text(labels, 'le="' + le + '"')
                lines.append(f"{self.name}_bucket{label_text} {running}")
            lines.append(f"{self.name}_sum{self._label_text(labels)} {_number(total[0])}")
            lines.append(f"{self.name}_count{self._label_text(labels)} {running}")
        return lines


def size_histogram(name: str, help_text: str, labels: Sequence[str] = ()) -> Histogram:
    """A histogram with power-of-four byte-size buckets (1 KiB … 128 MiB)."""
    return Histogram(name, help_text, labels, buckets=_SIZE_BUCKETS)


def render_all() -> str:
    """Every registered metric in Prometheus text exposition format 0.0.4."""
    lines: list[str] = []
    for metric in REGISTRY:
        lines.extend(metric.render())
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
