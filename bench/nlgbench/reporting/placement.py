"""Labels beside plotted points, placed inside their axes: beside the marker where a place is
free, else farther out with a leader line, never over another label, a marker or an interval bar
where that can be helped (matplotlib, imported on first use)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes

LABEL_SIZE = 8  # points: labels beside the plotted points


@dataclass(frozen=True)
class PointLabel:
    """A label to place beside a plotted point, which with its interval bar (low..high) and a marker
    of `radius` points the label should not cover."""

    x: float
    y: float
    text: str
    color: str
    low: float
    high: float
    radius: float = 6.0


_OFFSETS = (
    (6, 0, "left", "center"),
    (-6, 0, "right", "center"),
    (0, 7, "center", "bottom"),
    (0, -7, "center", "top"),
    (5, 5, "left", "bottom"),
    (5, -5, "left", "top"),
    (-5, 5, "right", "bottom"),
    (-5, -5, "right", "top"),
)  # points from the marker, text alignment


def _obstacles(ax: Axes, items: Sequence[PointLabel]) -> list[tuple[int, Any]]:
    """What labels should not cover, as (index of the point, box in pixels): each marker (its own
    label's cost leaves it out) and each interval bar (index -1: no label's cost leaves it out)."""
    from matplotlib.transforms import Bbox

    pixels = ax.figure.dpi / 72  # pixels per point
    obstacles = []
    for k, item in enumerate(items):
        mx, my = ax.transData.transform((item.x, item.y))
        r = item.radius * pixels
        obstacles.append((k, Bbox([[mx - r, my - r], [mx + r, my + r]])))
        if math.isfinite(item.low) and math.isfinite(item.high):
            (_, y0), (_, y1) = ax.transData.transform([(item.x, item.low), (item.x, item.high)])
            obstacles.append((-1, Bbox([[mx - 3 * pixels, y0], [mx + 3 * pixels, y1]])))
    return obstacles


def place_labels(ax: Axes, items: Sequence[PointLabel], renderer: Any) -> list[Any]:
    """Annotate each point beside it, inside the axes: the first position (right, left, above,
    below, diagonals; then farther out with a leader line) whose text lies inside the axes and
    covers no other label, marker or interval bar; where none is free, the inside position
    covering least; a label wider than the axes is shortened ('...') until it fits."""
    box = ax.get_window_extent(renderer).padded(-2)
    obstacles = _obstacles(ax, items)
    placed: list[Any] = []
    out = []

    def overlap(a: Any, b: Any) -> float:
        w, h = min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0)
        return w * h if w > 0 and h > 0 else 0.0

    def cost(b: Any, own: int) -> float:
        if not (b.x0 >= box.x0 and b.x1 <= box.x1 and b.y0 >= box.y0 and b.y1 <= box.y1):
            return math.inf
        return sum(overlap(b, o) for k, o in obstacles if k != own) + sum(overlap(b, other) for other in placed)

    def best_position(k: int, x: float, y: float, text: str, color: str) -> Any | None:
        best: tuple[float, Any] | None = None
        for scale in (items[k].radius / 6, 2.6, 4.2):  # beside the marker (a baseline's star is larger), then farther
            for dx, dy, ha, va in _OFFSETS:
                arrow = (
                    {"arrowstyle": "-", "color": "0.5", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 4}
                    if scale > 2
                    else None
                )
                ann = ax.annotate(
                    text,
                    (x, y),
                    xytext=(dx * scale, dy * scale),
                    textcoords="offset points",
                    ha=ha,
                    va=va,
                    fontsize=LABEL_SIZE,
                    color=color,
                    arrowprops=arrow,
                    zorder=5,
                )
                ann.set_in_layout(False)
                c = cost(ann.get_window_extent(renderer), k)
                if best is None or c < best[0]:
                    if best is not None:
                        best[1].remove()
                    best = (c, ann)
                else:
                    ann.remove()
                if best[0] == 0:
                    return best[1]
        if best is not None and math.isfinite(best[0]):
            return best[1]
        if best is not None:
            best[1].remove()
        return None

    for k, item in enumerate(items):
        shown = item.text
        ann = best_position(k, item.x, item.y, shown, item.color)
        while ann is None and len(shown) > 4:  # wider than the axes everywhere: shorten it
            shown = shown[: len(shown) - 4 if not shown.endswith("...") else len(shown) - 7] + "..."
            ann = best_position(k, item.x, item.y, shown, item.color)
        if ann is not None:
            placed.append(ann.get_window_extent(renderer))
            out.append(ann)
    return out
