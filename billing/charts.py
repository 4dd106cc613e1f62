"""Bar charts as plain SVG geometry (server-rendered: no chart library, no CDN)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WIDTH, HEIGHT, TOP = 600, 160, 10


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    title: str


def bar_chart(points: list[tuple[str, float, str]]) -> dict[str, Any]:
    """``points``: (label, value, tooltip) in order → bars scaled to the largest value."""
    top = max((value for _, value, _ in points), default=0) or 1
    step = WIDTH / max(len(points), 1)
    bars = []
    for n, (label, value, title) in enumerate(points):
        height = (HEIGHT - TOP) * value / top
        bars.append(
            Bar(
                x=round(n * step + step * 0.15, 2),
                y=round(HEIGHT - height, 2),
                width=round(step * 0.7, 2),
                height=round(height, 2),
                label=label,
                title=title,
            )
        )
    return {"bars": bars, "width": WIDTH, "height": HEIGHT}
