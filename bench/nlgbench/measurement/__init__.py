"""Measurement: how a cell is measured. `protocol` (every phase of a cell in order: data, load, prepare,
the memory pass, warm-up, timed repeats, their agreement), `trackers` (latency, CUDA events, memory:
context managers), `energy` (hardware energy counters), `environment` (the machine and versions a
result records), `devices` (the cell's `Device`, read once, and the check that this machine has one).
Layer: above metrics; imports foundations, statistics, data, encoders and metrics.
"""
