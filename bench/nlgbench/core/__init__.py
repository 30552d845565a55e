"""Core: what one cell is. `spec` (sweep specs -> cells; its `executor:` block is read by
`executor_options`, which checks each launcher's settings with the launcher's own rules, so a bad key
is refused with the spec, before anything runs), `cell` (the cell's
config, its id and its folder's file names), `labels` (every label of a cell), `recipe` (the cell's scorer:
built and signed in one place), `result` (result.json),
`datawarnings` (a cell's data warnings), `scores` (scores.csv) and `signature` (the scorer's
reproducibility signature). Layer: above measurement; imports foundations, statistics, data,
encoders, metrics and measurement.
"""
