"""Execution: how a sweep's cells get run. `launcher_base` (what every launcher shares: the sweep
around the cells), `preflight` (the checks before any cell), `leakage` (the distillation leakage
guard, run by the launchers and the worker), `workerprocess` (one cell in a fresh worker process),
`local` and `slurm` (the two launchers, peers), `sweep` (the one entry, choosing a launcher),
`worker` (one cell, in its own process), `eta` and `progress`. Layer: above runs; imports
foundations, statistics, data, encoders, metrics, measurement, core and runs.
"""
