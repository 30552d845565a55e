"""The report's figures: `content` (what a figure shows: dataset groups, points, captions,
figures.tex), `style` (how it looks: the style file, widths, colours, ticks), `placement` (point
labels that cover nothing) and `drawing` (matplotlib: the panels, the files written)."""
