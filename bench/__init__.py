"""nlgbench harness: sweep specs, encoders, measurement, results store, correlation, CLI."""

__version__ = "0.1.0"
