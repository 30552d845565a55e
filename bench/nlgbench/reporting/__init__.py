"""Reporting: what a finished run folder shows. `report` (the page and its files: figures, tables,
index.html), `compare` (candidate vs baseline encoder), and their parts: `quality` (which correlation
measures quality), `numbers` (Table 3, Table 4, intervals), `tradeoff` (the trade-off table),
`figures` and `placement` (matplotlib), `renderers` (Markdown, LaTeX, HTML), `tables` (results.csv as
Markdown). May import the layers below it (foundations to execution); it reads run folders through
`nlgbench.runs.rundata.RunData` and runs nothing."""
