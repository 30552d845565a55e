"""Execution: how a sweep's cells get run. `base` (the launcher base and the worker process every
launcher starts), `local` and `slurm` (the two launchers, peers), `sweep` (the one entry, choosing
a launcher), `worker` (one cell, in its own process), `eta` and `progress`. Layer: above runs;
imports foundations, statistics, data, encoders, metrics, measurement, core and runs.
"""
