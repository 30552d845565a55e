"""Labels beside plotted points, placed inside their axes so that none covers a marker, an interval
bar, a line (the Pareto front, another label's leader line) or another label (matplotlib, imported
on first use). What must stay free is read from the axes' own artists after drawing, in display
pixels, so whatever a figure draws is avoided: markers as boxes of their size, error bars and
lines as segments of their width. A label goes beside its point where a place is free, else
farther out with a thin leader line; where nothing is free, at the place covering least. Also what
can be seen where at the final size: bars too short to see (`drop_unseen`), each point's pixel for its
tooltip (`hotspots`)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation

LABEL_SIZE = 7  # points: labels beside the plotted points (the style's smallest text)
LEADER_FROM = 11.0  # points from the point's centre: labels farther out get a leader line
_DISTANCES = (3.0, 5.5, 8.0, 11.0, 15.0, 20.0, 27.0, 36.0, 48.0, 64.0, 85.0)  # points from the point's centre
_CLEAR = 1.0  # pixels kept free around a label
COVER, CROSS = 100.0, 5.0  # the price of a label covering something; of its leader line crossing something
Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels
Segment = tuple[float, float, float, float, float]  # x0, y0, x1, y1, half its width (pixels)


@dataclass(frozen=True)
class PointLabel:
    """A label to place beside the plotted point (x, y) (data coordinates)."""

    x: float
    y: float
    text: str
    color: str


@dataclass
class Obstacles:
    """What a label must not cover, in display pixels: boxes (markers, placed labels) and segments
    (error bars, lines, leader lines)."""

    boxes: list[Box] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)

    def cost(self, box: Box) -> float:
        """How much `box` covers: per box it overlaps COVER plus the area, per segment it crosses
        COVER (a thin line through a label is as bad as a marker under it); 0 for a free place."""
        total = sum(COVER + a for b in self.boxes if (a := _overlap(box, b)) > 0)
        return total + sum(COVER for s in self.segments if _crosses(s, box))


def _overlap(a: Box, b: Box) -> float:
    w, h = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _crosses(seg: Segment, box: Box) -> bool:
    """Whether the segment (widened by its half width) meets the box: Liang-Barsky clipping."""
    x0, y0, x1, y1, half = seg
    bx0, by0, bx1, by1 = box[0] - half, box[1] - half, box[2] + half, box[3] + half
    dx, dy = x1 - x0, y1 - y0
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, x0 - bx0), (dx, bx1 - x0), (-dy, y0 - by0), (dy, by1 - y0)):
        if p == 0:
            if q < 0:
                return False
            continue
        t = q / p
        if p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return False
    return True


def _segments_cross(a: Segment, b: Segment) -> bool:
    """Whether segment a (its width left aside) meets segment b: an axis-parallel b (interval bars,
    the front's steps) as the box of its width, any other (a leader line) where the two cross."""
    if b[0] == b[2] or b[1] == b[3]:
        half = b[4]
        box = (min(b[0], b[2]) - half, min(b[1], b[3]) - half, max(b[0], b[2]) + half, max(b[1], b[3]) + half)
        return _crosses((a[0], a[1], a[2], a[3], 0.0), box)

    def side(p: tuple[float, float], q: tuple[float, float], r: tuple[float, float]) -> float:
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    p1, p2, q1, q2 = (a[0], a[1]), (a[2], a[3]), (b[0], b[1]), (b[2], b[3])
    return side(q1, q2, p1) * side(q1, q2, p2) <= 0 and side(p1, p2, q1) * side(p1, p2, q2) <= 0


def _polyline(points: np.ndarray, half: float) -> Iterator[Segment]:
    for (x0, y0), (x1, y1) in zip(points[:-1], points[1:], strict=True):
        if all(math.isfinite(v) for v in (x0, y0, x1, y1)):
            yield (float(x0), float(y0), float(x1), float(y1), half)


def axes_obstacles(ax: Axes) -> Obstacles:
    """What the axes draw, in display pixels: every marker (Line2D markers, error-bar caps, scatter
    rings) as a box of its size and edge, every line (Line2D with a line style, the segments of
    error-bar collections) as segments of its width."""
    from matplotlib.collections import LineCollection, PathCollection

    px = ax.figure.dpi / 72  # pixels per point
    out = Obstacles()
    for line in ax.lines:
        if not line.get_visible():
            continue
        xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
        if line.get_marker() not in (None, "None", "", " ", "none"):
            r = (line.get_markersize() + line.get_markeredgewidth()) / 2 * px
            out.boxes += [(x - r, y - r, x + r, y + r) for x, y in xy if math.isfinite(x) and math.isfinite(y)]
        if line.get_linestyle() not in ("None", "", " ", "none") and len(xy) > 1:
            out.segments += _polyline(xy, line.get_linewidth() / 2 * px)
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        if isinstance(coll, LineCollection):
            widths = np.atleast_1d(coll.get_linewidth())
            for k, seg in enumerate(coll.get_segments()):
                half = float(widths[k % len(widths)]) / 2 * px if len(widths) else px / 2
                out.segments += _polyline(coll.get_transform().transform(np.asarray(seg, float)), half)
        elif isinstance(coll, PathCollection):
            offsets = coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), float))
            sizes, widths = coll.get_sizes(), np.atleast_1d(coll.get_linewidth())
            for k, (x, y) in enumerate(offsets):
                size = float(sizes[k % len(sizes)]) if len(sizes) else 36.0
                edge = float(widths[k % len(widths)]) if len(widths) else 1.0
                r = (math.sqrt(size) + edge) / 2 * px
                out.boxes.append((x - r, y - r, x + r, y + r))
    return out


def _alignment(cos: float, sin: float) -> tuple[str, str]:
    ha = "left" if cos > 0.38 else "right" if cos < -0.38 else "center"
    va = "bottom" if sin > 0.38 else "top" if sin < -0.38 else "center"
    return ha, va


def _offsets() -> Iterator[tuple[float, float, str, str]]:
    """Candidate offsets (points) and alignments, nearest first: right, left, above, below, the
    diagonals, then the angles between them."""
    first = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)]
    for ring, dist in enumerate(_DISTANCES):
        angles = [math.atan2(dy, dx) for dx, dy in first]
        if ring >= 2:
            angles += [a + math.pi / 8 for a in angles] + [a - math.pi / 8 for a in angles]
        for a in angles:
            cos, sin = math.cos(a), math.sin(a)
            yield dist * cos, dist * sin, *_alignment(cos, sin)


def _box_at(x: float, y: float, w: float, h: float, ha: str, va: str) -> Box:
    """The box of a w x h text anchored at (x, y) with this alignment, grown by _CLEAR."""
    x0 = x if ha == "left" else x - w if ha == "right" else x - w / 2
    y0 = y if va == "bottom" else y - h if va == "top" else y - h / 2
    return (x0 - _CLEAR, y0 - _CLEAR, x0 + w + _CLEAR, y0 + h + _CLEAR)


def _inside(box: Box, frame: Box) -> bool:
    """Whether the box lies in the frame (to a hundredth of a pixel: a place computed at the edge)."""
    e = 0.01
    return box[0] >= frame[0] - e and box[1] >= frame[1] - e and box[2] <= frame[2] + e and box[3] <= frame[3] + e


def _leader(box: Box, point: tuple[float, float], own: Box) -> Segment:
    """The leader line from the label's centre to the edge of its point's marker box `own`."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    px, py = point
    dx, dy = cx - px, cy - py
    r = max(own[2] - px, 0.0)
    norm = math.hypot(dx, dy) or 1.0
    return (px + dx / norm * r, py + dy / norm * r, cx, cy, 0.5)


def label_texts(text: str) -> list[str]:
    """The ways a label may be written: on one line, and where it has a bracketed part (an encoder's
    variant, `name[num_layers=3]`) on two lines, broken before the bracket (half as wide)."""
    cut = text.find("[", 1)
    return [text] if cut < 0 else [text, f"{text[:cut]}\n{text[cut:]}"]


@dataclass(frozen=True)
class Placed:
    """The labels `place_labels` drew, and the texts of those that cover something (no free place)."""

    annotations: list[Annotation]
    covering: list[str]


def place_labels(ax: Axes, items: Sequence[PointLabel], renderer: Any) -> Placed:
    """Annotate each point inside the axes (call after the layout is final), at the first free
    place of: beside the point (`_offsets` nearer than LEADER_FROM points) on one line, then on
    two (`label_texts`); farther out with a leader line; the free place nearest to the point anywhere
    in the axes. Where none is free, the place covering least (named in `Placed.covering`: the
    caller may make room and place again). A label wider than the axes is shortened ('...') until
    it fits."""
    from matplotlib.text import Text

    frame_box = ax.get_window_extent(renderer)
    frame: Box = (frame_box.x0 + 1, frame_box.y0 + 1, frame_box.x1 - 1, frame_box.y1 - 1)
    obstacles = axes_obstacles(ax)
    px = ax.figure.dpi / 72
    out, covering = [], []
    for item in items:
        px_x, px_y = ax.transData.transform((item.x, item.y))
        point = (float(px_x), float(px_y))
        own = _own_marker(obstacles, point)
        ways = label_texts(item.text)
        texts = [_fitting_text(ax, t, renderer, frame[2] - frame[0] - 2 * _CLEAR) for t in ways]
        texts = [t for t, way in zip(texts, ways, strict=True) if t[0] == way] or texts  # whole ones, if any
        near = [o for o in _offsets() if math.hypot(o[0], o[1]) < LEADER_FROM]
        far = [o for o in _offsets() if math.hypot(o[0], o[1]) >= LEADER_FROM]
        phases = [(t, near) for t in texts] + [(t, far) for t in texts]
        phases += [(t, _grid(point, frame, t[1][0], t[1][1], px)) for t in texts]
        best: tuple[float, str, float, float, str, str] | None = None  # cost, text, dx, dy (points), ha, va
        for (text, (w, h)), offsets in phases:
            for dx, dy, ha, va in offsets:
                box = _box_at(point[0] + dx * px, point[1] + dy * px, w, h, ha, va)
                if not _inside(box, frame):
                    continue
                c = obstacles.cost(box)
                if math.hypot(dx, dy) >= LEADER_FROM:
                    c += _leader_cost(obstacles, _leader(box, point, own), own)
                if best is None or c < best[0]:
                    best = (c, text, dx, dy, ha, va)
                if c == 0:
                    break
            if best is not None and best[0] == 0:
                break
        if best is None:
            continue  # the axes are smaller than the label: left out rather than drawn outside
        cost, text, dx, dy, ha, va = best
        if cost >= COVER:
            covering.append(text)
        leader = math.hypot(dx, dy) >= LEADER_FROM
        ann = ax.annotate(
            text,
            (item.x, item.y),
            xytext=(dx, dy),
            textcoords="offset points",
            ha=ha,
            va=va,
            fontsize=LABEL_SIZE,
            color=item.color,
            zorder=5,
            annotation_clip=False,
            arrowprops={
                "arrowstyle": "-",
                "color": "0.45",
                "linewidth": 0.5,
                "shrinkA": 0,
                "shrinkB": max(own[2] - point[0], 0.0) / px,
            }
            if leader
            else None,
        )
        ann.set_in_layout(False)
        ann.update_positions(renderer)
        drawn = Text.get_window_extent(ann, renderer)  # the text alone (an Annotation's adds its leader's box)
        box = (drawn.x0 - _CLEAR, drawn.y0 - _CLEAR, drawn.x1 + _CLEAR, drawn.y1 + _CLEAR)
        obstacles.boxes.append(box)
        if leader:
            obstacles.segments.append(_leader(box, point, own))
        out.append(ann)
    return Placed(out, covering)


def _own_marker(obstacles: Obstacles, point: tuple[float, float]) -> Box:
    """The largest marker box centred on the point (its marker, rings around it)."""
    mine = [b for b in obstacles.boxes if _centred(b, point)]
    return max(mine, key=lambda b: b[2] - b[0], default=(*point, *point))


def _centred(box: Box, point: tuple[float, float]) -> bool:
    return abs((box[0] + box[2]) / 2 - point[0]) < 0.5 and abs((box[1] + box[3]) / 2 - point[1]) < 0.5


def _leader_cost(obstacles: Obstacles, leader: Segment, own: Box) -> float:
    """CROSS per marker, label, line or bar a leader line crosses (always less than a label covering
    anything): none for its own point's marker, and its own bars and their caps, and the front's steps
    from its point."""
    centre = ((own[0] + own[2]) / 2, (own[1] + own[3]) / 2)
    dot: Box = (*centre, *centre)
    mine = [s for s in obstacles.segments if _crosses(s, dot)]
    others = [s for s in obstacles.segments if not _crosses(s, dot)]

    def on_mine(b: Box) -> bool:
        c = ((b[0] + b[2]) / 2, (b[1] + b[3]) / 2)
        return _centred(b, centre) or any(_crosses(s, (*c, *c)) for s in mine)

    boxes = sum(CROSS for b in obstacles.boxes if _crosses(leader, b) and not on_mine(b))
    return boxes + sum(CROSS for s in others if _segments_cross(leader, s))


def _grid(point: tuple[float, float], frame: Box, w: float, h: float, px: float) -> list[tuple[float, float, str, str]]:
    """Every place in the axes on a grid of a third of a line's height (LABEL_SIZE), nearest to the
    point first (offsets in points, centred alignment): where nothing near the point is free."""
    x, y = point
    step_x = step_y = LABEL_SIZE * px / 3
    places = []
    cy = frame[1] + h / 2 + _CLEAR
    while cy <= frame[3] - h / 2 - _CLEAR:
        cx = frame[0] + w / 2 + _CLEAR
        while cx <= frame[2] - w / 2 - _CLEAR:
            places.append((math.hypot(cx - x, cy - y), (cx - x) / px, (cy - y) / px))
            cx += step_x
        cy += step_y
    return [(dx, dy, "center", "center") for _, dx, dy in sorted(places)]


def _fitting_text(ax: Axes, text: str, renderer: Any, width: float) -> tuple[str, tuple[float, float]]:
    """The label's text, shortened with '...' until it is narrower than `width` pixels, and its size."""
    while True:
        probe = ax.text(0, 0, text, fontsize=LABEL_SIZE)
        extent = probe.get_window_extent(renderer)
        probe.remove()
        if extent.width <= width or len(text) <= 4:
            return text, (extent.width, extent.height)
        text = text[: len(text) - 4 if not text.endswith("...") else len(text) - 7] + "..."


# ----------------------------------------------------------------------------- what is seen where


def drop_unseen(fig: Figure, gid: str, marker: float, beyond: float) -> bool:
    """Removes the horizontal bars of the given gid (the timed repeats' spread) that reach less than
    `beyond` points out of what is drawn on their point (its marker, `marker` points wide, and any ring
    around it) at the figure's final size; whether any is left to be seen."""
    from matplotlib.collections import LineCollection, PathCollection

    px = fig.dpi / 72
    fig.draw_without_rendering()
    seen = False
    for ax in fig.axes:
        rings = []  # (x, y, radius) in pixels: markers, then the rings drawn around them
        for line in ax.lines:
            if line.get_marker() not in (None, "None", "", " ", "none"):
                xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
                rings += [(x, y, marker / 2 * px) for x, y in xy]
        for coll in ax.collections:
            if isinstance(coll, PathCollection):
                offsets = coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), float))
                sizes, widths = coll.get_sizes(), np.atleast_1d(coll.get_linewidth())
                rings += [
                    (x, y, (math.sqrt(float(sizes[k % len(sizes)])) + float(widths[k % len(widths)])) / 2 * px)
                    for k, (x, y) in enumerate(offsets)
                ]
        for coll in [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == gid]:
            reach = []
            for seg in coll.get_segments():
                (x0, y), (x1, _) = coll.get_transform().transform(np.asarray(seg, float))
                lo, hi = min(x0, x1), max(x0, x1)
                centre = [cx for cx, cy, _ in rings if abs(cy - y) < 0.5 and lo - 0.5 <= cx <= hi + 0.5]
                cx = centre[0] if centre else (lo + hi) / 2
                drawn = max([0.0] + [r for rx, ry, r in rings if abs(rx - cx) < 0.5 and abs(ry - y) < 0.5])
                reach.append(max(hi - cx, cx - lo) - drawn)
            if all(r < beyond * px for r in reach):
                coll.remove()
            else:
                seen = True
    return seen


def hotspots(fig: Figure, tooltips: Mapping[str, str]) -> tuple[tuple[float, float, str], ...]:
    """Each plotted point with a tooltip (`point_tooltips`): its centre in the PNG's pixels (origin at
    the top left) and its text, for index.html."""
    height = fig.bbox.height
    out = []
    for ax in fig.axes:
        for line in ax.lines:
            if line.get_gid() in tooltips and line.get_marker() not in (None, "None", "", " ", "none"):
                x, y = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))[0]
                out.append((round(float(x), 1), round(float(height - y), 1), tooltips[str(line.get_gid())]))
    return tuple(out)


MAKE_ROOM = 3  # times the y range may grow to give a label a free place


def place_all(fig: Figure, labels: list[tuple[Axes, list[PointLabel]]], ylim: tuple[float, float]) -> None:
    """Every panel's point labels, placed on the final layout (frozen, so it stays as they saw it);
    where a label finds no free place, the y range (of every panel) grows by a fifth each way and
    all are placed again, up to MAKE_ROOM times."""
    for attempt in range(MAKE_ROOM + 1):
        fig.set_layout_engine("constrained")
        fig.draw_without_rendering()
        fig.set_layout_engine("none")  # the layout is final: labels are placed against it, and it stays
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        placed = [place_labels(ax, items, renderer) for ax, items in labels]
        if attempt == MAKE_ROOM or not any(p.covering for p in placed):
            return
        for p in placed:
            for ann in p.annotations:
                ann.remove()
        lo, hi = ylim
        ylim = (lo - 0.2 * (hi - lo), hi + 0.2 * (hi - lo))
        for ax, _ in labels:
            ax.set_ylim(*ylim)
