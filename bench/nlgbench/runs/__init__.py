"""Runs: the run folder and what it holds. `folder` (its layout and lock), `store` (results.sqlite),
`csvfiles` (results.csv, correlations.csv), `repair` (rebuild the store from cells/), `importscores` (outside
scores as a cell), `rundata` (a run as report and compare read it). Layer: above core; imports
foundations, statistics, data, encoders, metrics, measurement and core.
"""
