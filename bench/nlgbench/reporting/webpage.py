"""Pieces of the report's index.html (`nlgbench.reporting.report.index_html` puts them together): the
style, the figures at a readable size, the run's facts, tables without empty columns.

A figure is shown at about 1.25 times its printed size (SCREEN_PX_PER_INCH; its size read from the
image file itself), never wider than MAX_WIDTH_PX nor taller than MAX_HEIGHT_PX, never enlarged past
its pixels; figures sit side by side where the page is wide enough. A click opens the full-size PDF
(else SVG, else PNG); the caption (`FigureFile.caption`) goes under it."""

from __future__ import annotations

import html
import re
import struct
from collections.abc import Sequence
from pathlib import Path

from nlgbench.foundations import fmt
from nlgbench.foundations.files import read_bytes
from nlgbench.reporting.figures.drawing import FigureFile
from nlgbench.reporting.markup import TextTable
from nlgbench.reporting.runinfo import NOT_RECORDED, RunInfo

SCREEN_PX_PER_INCH = 120  # CSS px per printed inch: 7 pt text shows at about 12 px
MAX_WIDTH_PX = 900
MAX_HEIGHT_PX = 1000  # a tall figure is shown narrower, so no figure fills more than about a screen
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG_LENGTH = re.compile(r"^([0-9.]+)(pt|px|in|cm|mm)?$")
INCHES_PER = {"pt": 1 / 72, "px": 1 / 96, "in": 1.0, "cm": 1 / 2.54, "mm": 1 / 25.4, None: 1 / 96}
SHOWN_FORMATS = (".png", ".svg")  # what a browser shows inline, preferred first
FULL_SIZE_FORMATS = (".pdf", ".svg", ".png")  # what a click on the figure opens, preferred first

STYLE = (
    "<style>body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;line-height:1.35}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}"
    "td.t,th{text-align:left}caption{text-align:left;font-weight:bold}"
    "dl.run{display:grid;grid-template-columns:max-content auto;gap:2px 1em;margin:1em 0}"
    "dl.run dt{font-weight:bold}dl.run dd{margin:0}"
    ".figures{display:flex;flex-wrap:wrap;gap:1.5em 2em;align-items:flex-start}"
    "figure{margin:0;max-width:100%}figure img{display:block;max-width:100%;height:auto;border:1px solid #ddd}"
    "figcaption{font-size:0.9em;margin-top:0.4em}a.plot{position:relative;display:block}"
    "svg.points{position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none}"
    "svg.points circle{fill:transparent;pointer-events:all;cursor:help}th{cursor:pointer}"
    "th[aria-sort=ascending]::after{content:' \\25B2'}th[aria-sort=descending]::after{content:' \\25BC'}</style>"
)
# A click on a column's header sorts its table by it (numbers by value, first; again: the other way).
SORT_SCRIPT = """<script>
document.querySelectorAll('table').forEach(t => t.querySelectorAll('thead th').forEach((th, k) => {
  th.title = 'sort by this column';
  th.addEventListener('click', () => {
    const body = t.tBodies[0], rows = Array.from(body.rows), up = th.getAttribute('aria-sort') !== 'ascending';
    t.querySelectorAll('thead th').forEach(h => h.removeAttribute('aria-sort'));
    th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
    const key = r => { const s = r.cells[k] ? r.cells[k].textContent.trim() : '';
      const v = parseFloat(s.replace(/^< /, '')); return isNaN(v) ? s : v; };
    rows.sort((a, b) => { const x = key(a), y = key(b), nx = typeof x === 'number', ny = typeof y === 'number';
      const c = nx && ny ? x - y : nx ? -1 : ny ? 1 : x.localeCompare(y); return up ? c : -c; });
    rows.forEach(r => body.appendChild(r));
  });
}));
</script>"""


def png_inches(data: bytes) -> tuple[float, float, int] | None:
    """A PNG's printed size (width and height in inches, from its pHYs resolution, as matplotlib
    writes it) and its width in pixels; None without a resolution or not a PNG."""
    if data[:8] != PNG_SIGNATURE or len(data) < 24:
        return None
    width, height = struct.unpack(">II", data[16:24])
    pos = 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"pHYs" and length == 9:
            per_x, per_y, unit = struct.unpack(">IIB", data[pos + 8 : pos + 17])
            if unit == 1 and per_x and per_y:  # pixels per metre
                return width / (per_x * 0.0254), height / (per_y * 0.0254), width
            return None
        if kind in (b"IDAT", b"IEND"):  # pHYs comes before the image data
            return None
        pos += 12 + length
    return None


def svg_inches(text: str) -> tuple[float, float] | None:
    """An SVG's printed size in inches from its root's width and height ('460.8pt'); None without."""
    root = re.search(r"<svg\b[^>]*>", text)
    if root is None:
        return None
    sizes = []
    for name in ("width", "height"):
        found = re.search(rf'\s{name}="([^"]+)"', root.group(0))
        value = SVG_LENGTH.match(found.group(1).strip()) if found else None
        if value is None:
            return None
        sizes.append(float(value.group(1)) * INCHES_PER[value.group(2)])
    return sizes[0], sizes[1]


def shown_width(path: Path) -> tuple[int, int] | None:
    """The width and height (CSS px) at which index.html shows an image file (see the module
    docstring); None where the file says nothing of its printed size."""
    data = read_bytes(path)
    if path.suffix == ".png":
        found = png_inches(data)
        if found is None:
            return None
        inches_w, inches_h, pixels = found
    else:
        size = svg_inches(data.decode("utf-8", errors="replace"))
        if size is None:
            return None
        (inches_w, inches_h), pixels = size, MAX_WIDTH_PX
    width = min(MAX_WIDTH_PX, inches_w * SCREEN_PX_PER_INCH, MAX_HEIGHT_PX * inches_w / inches_h, pixels)
    return round(width), round(width * inches_h / inches_w)


def first_of(paths: Sequence[Path], suffixes: Sequence[str]) -> Path | None:
    """The first of `paths` with the first of `suffixes` that any has."""
    for suffix in suffixes:
        for p in paths:
            if p.suffix == suffix:
                return p
    return None


def caption_text(f: FigureFile) -> str:
    """A figure's caption: `FigureFile.caption` where the figure has one, else its title and note."""
    caption = str(getattr(f, "caption", "") or "")
    if caption:
        return caption
    return f.title + (f". {f.note[:1].upper()}{f.note[1:]}" if f.note else "")


def figure_html(f: FigureFile) -> str:
    """A figure of index.html: the image at a readable size (PNG, else SVG), a link from it to the
    full-size PDF (else SVG, else PNG), the caption, and links to every file of the figure."""
    shown = first_of(f.paths, SHOWN_FORMATS)
    full = first_of(f.paths, FULL_SIZE_FORMATS)
    links = ", ".join(f"<a href='{html.escape(p.name)}'>{p.suffix[1:].upper()}</a>" for p in f.paths if p != shown)
    method = str(getattr(f, "method", "") or "")
    details = f"<details><summary>how it was made</summary>{html.escape(method)}</details>" if method else ""
    caption = f"<figcaption>{html.escape(caption_text(f))} ({links}){details}</figcaption>" if links else ""
    if shown is None:
        return f"<figure>{caption or html.escape(caption_text(f))}</figure>"
    size = shown_width(shown)
    width = size[0] if size else MAX_WIDTH_PX
    box = f" width='{size[0]}' height='{size[1]}'" if size else ""
    image = f"<img src='{html.escape(shown.name)}' alt='{html.escape(f.title)}'{box}>" + points_overlay(f, shown)
    target = full or shown
    return (
        f"<figure style='width:{width}px'><a href='{html.escape(target.name)}' class='plot' title='full size "
        f"({target.suffix[1:].upper()})'>{image}</a>{caption}</figure>"
    )


def points_overlay(f: FigureFile, shown: Path) -> str:
    """Over a PNG, a transparent circle per plotted point whose `<title>` is its tooltip (encoder,
    x value, quality and interval, cell id: `FigureFile.hotspots`), scaled with the image; '' for
    none."""
    spots = getattr(f, "hotspots", ())
    width, height = getattr(f, "pixels", (0.0, 0.0))
    if shown.suffix != ".png" or not spots or not width:
        return ""
    r = max(6.0, width / 80)  # pixels of the PNG: a marker and its rings
    marks = "".join(
        f"<circle cx='{x:g}' cy='{y:g}' r='{r:.0f}'><title>{html.escape(text)}</title></circle>" for x, y, text in spots
    )
    return f"<svg class='points' viewBox='0 0 {width:g} {height:g}' preserveAspectRatio='none'>{marks}</svg>"


def figures_html(figures: Sequence[FigureFile]) -> list[str]:
    """Every figure, side by side where the page is wide enough."""
    return ["<div class='figures'>", *(figure_html(f) for f in figures), "</div>"] if figures else []


def run_html(info: RunInfo) -> str:
    """The run's facts (`nlgbench.reporting.runinfo`) as a definition list, the spec name first."""
    spec = [("spec", f"{NOT_RECORDED}. {info.title_note}")] if info.title_note else [("spec", info.title)]
    rows = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in spec + info.facts)
    return f"<dl class='run'>{rows}</dl>"


def without_empty_columns(table: TextTable, keep: int = 2) -> TextTable:
    """`table` without the columns after the first `keep` that are unknown ('-') or blank in every
    row (e.g. GPU time in a CPU-only run)."""
    header, rows = table
    if not rows:
        return table
    kept = [k for k in range(len(header)) if k < keep or any(r[k] not in (fmt.UNKNOWN, "") for r in rows)]
    return [header[k] for k in kept], [[r[k] for k in kept] for r in rows]
