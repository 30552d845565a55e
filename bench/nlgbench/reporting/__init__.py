"""Reporting: what a finished run folder shows. `report` (the page and its files: figures, tables,
index.html), `compare` (candidate vs baseline encoder), and their parts: `quality` (which correlation
measures quality), `encoder_lookup` (the run's encoder label a given name means), one module per
table, named after the files it writes: `relative_table` (relative.*: Table 3, and the numbers the
tables and figures share), `quantities_table` (quantities.*: Table 4), `tradeoff_table` (tradeoff.*),
`tex_files` (the .tex files: table floats, preview.tex); `figures/` (matplotlib), `markup` (tables as
Markdown, LaTeX, HTML), `runinfo` and `webpage` (index.html's parts), `tables` (results.csv as
Markdown). May import the layers below it (foundations to execution); it reads run folders through
`nlgbench.runs.rundata.RunData` and runs nothing."""
