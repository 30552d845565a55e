"""Core: what one cell is. `spec` (sweep specs -> cells), `cell` (the cell's config, its id and its
folder's file names), `result` (result.json), `scores` (scores.csv), `labels` (every label of a cell),
`executor_options` (how a spec asks its cells to be run) and `leakage` (the distillation leakage guard).
Layer: above measurement; imports foundations, statistics, data, encoders, metrics and measurement.
"""
