"""Measurement: how a cell's scoring is timed. `protocol` (warm-up, timed repeats, their agreement),
`trackers` (latency, CUDA events, memory: context managers), `environment` (the machine and versions a
result records), `devices` (the device names and the check that this machine has one).
Layer: above metrics; imports foundations, statistics, data, encoders and metrics.
"""
