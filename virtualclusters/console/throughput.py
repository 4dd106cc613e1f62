"""A cluster's throughput page: records and bytes in and out (sent to consumers) per
second over 1 h, 24 h or 7 d, as
server-drawn SVG line charts (no script, no CDN); the numbers come from the sampled
history (`virtualclusters.throughput`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.throughput.services import RANGES, throughput_series

WIDTH, HEIGHT, PAD = 600, 160, 6
COLORS = ("#0e7490", "#b45309", "#7c3aed", "#15803d", "#be123c", "#1d4ed8")


def line_chart(series: list[tuple[str, list[dict[str, Any]]]], key: str) -> dict[str, Any]:
    """SVG geometry for lines sharing one time axis and one value axis (from 0)."""
    points = [p for _, ps in series for p in ps]
    if not points:
        return {"empty": True}
    times = [p["at"].timestamp() for p in points]
    start, end = min(times), max(times)
    top = max(p[key] for p in points) or 1
    span = (end - start) or 1

    def xy(p: dict[str, Any]) -> tuple[float, float]:

        x = PAD + (p["at"].timestamp() - start) / span * (WIDTH - 2 * PAD)
        y = HEIGHT - PAD - p[key] / top * (HEIGHT - 2 * PAD)
        return round(x, 1), round(y, 1)

    lines = []
    for n, (label, ps) in enumerate(series):
        coords = [xy(p) for p in ps]
        lines.append(
            {
                "label": label,
                "color": COLORS[n % len(COLORS)],
                "points": " ".join(f"{x},{y}" for x, y in coords),
                "dots": coords,
                "last": ps[-1][key] if ps else 0,
            }
        )
    return {
        "empty": False,
        "width": WIDTH,
        "height": HEIGHT,
        "top": top,
        "start": min(p["at"] for p in points),
        "end": max(p["at"] for p in points),
        "lines": lines,
    }


@login_required
@require_GET
def cluster_throughput(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    span = request.GET.get("range", "1h")
    span = span if span in RANGES else "1h"
    series = throughput_series(cluster, span)
    both = [("all topics", series["cluster"])]
    topics = list(series["topics"].items())
    charts = [
        ("Records in per second", "records", line_chart(both, "records_per_s")),
        ("Bytes in per second", "bytes", line_chart(both, "bytes_per_s")),
        ("Records out per second", "records-out", line_chart(both, "records_out_per_s")),
        ("Bytes out per second", "bytes-out", line_chart(both, "bytes_out_per_s")),
        ("Records in per second, by topic", "topics", line_chart(topics, "records_per_s")),
        ("Records out per second, by topic", "topics-out", line_chart(topics, "records_out_per_s")),
        ("Consumer-group lag (records)", "lag", line_chart(list(series["groups"].items()), "lag")),
    ]  # fmt: skip
    return render(
        request,
        "console/throughput.html",
        {"cluster": cluster, "span": span, "spans": list(RANGES), "charts": charts},
    )
